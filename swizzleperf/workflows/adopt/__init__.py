"""`swizzleperf adopt`: a stock Triton module rewritten as a kernel file that follows the contract."""
