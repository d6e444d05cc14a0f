"""Launches recorded from the user's own code: the instrumentation that runs inside it, and the record."""
