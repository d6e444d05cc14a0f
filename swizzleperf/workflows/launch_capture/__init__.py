"""`swizzleperf capture`: launches recorded from the user's own command, turned into a kernel file."""
