"""Trace capture: the Triton interpreter, batched over programs, observed load by load."""
