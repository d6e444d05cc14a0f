"""`python -m swizzleperf` is the `swizzleperf` command."""

from swizzleperf.cli import main

main()
