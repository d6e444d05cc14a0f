"""Schedules beyond the program id: the order in which a persistent program scans its loop (issue 16)."""
