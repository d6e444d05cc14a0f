"""The records every stage speaks: proposals, attempts, bottleneck reports, runs (pydantic models only)."""
