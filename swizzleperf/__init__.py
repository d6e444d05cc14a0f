"""swizzleperf: find program-id remaps that raise L2 hit rate of Triton kernels on multi-die GPUs."""

__version__ = "0.1.0"
