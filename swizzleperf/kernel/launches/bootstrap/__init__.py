"""The directory `swizzleperf capture` puts first on a child's PYTHONPATH (its sitecustomize)."""
