"""The kernel stage: a kernel file's contract, a candidate's parts, and failures in the user's own code."""
