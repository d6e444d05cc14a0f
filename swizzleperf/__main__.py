"""`python -m swizzleperf` is the `swizzleperf` command."""

from swizzleperf.cli.main import main

main()
