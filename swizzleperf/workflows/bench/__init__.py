"""`swizzleperf bench`: the optimize loop over a suite of kernels, and whether each best remap generalises."""
