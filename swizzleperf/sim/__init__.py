"""The embedded L2 simulator: trace capture, dispatch model and per-die cache model."""
