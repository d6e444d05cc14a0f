"""Untrusted text and code: bounded parsing, source lines, and the confined child processes that run candidates."""
