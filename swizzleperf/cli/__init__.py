"""The `swizzleperf` command line: typer and rich only (main.py registers every command)."""
