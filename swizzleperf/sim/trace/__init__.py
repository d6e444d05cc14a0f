"""A captured memory trace: the record, its compact on-disk form, and the trace cache."""
