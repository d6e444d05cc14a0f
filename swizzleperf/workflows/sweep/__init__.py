"""`swizzleperf sweep`: attention mappings over a grid of shapes."""
