"""The `swizzleperf` command line (see app.py); importing it registers every command."""

from swizzleperf.cli import capture_command, kernel_commands, store_commands
from swizzleperf.cli.app import _remap_from_file, app, console, main

__all__ = ["_remap_from_file", "app", "capture_command", "console", "kernel_commands", "main", "store_commands"]
