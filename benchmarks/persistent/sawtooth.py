"""A candidate for kernels/attention_persistent.py: its own block-first tiles, the sawtooth K/V order.

    swizzleperf profile kernels/attention_persistent.py --size gb10_1x64k --hardware gb10 --remap benchmarks/persistent/sawtooth.py
"""

import triton
import triton.language as tl


@triton.jit
def swizzle(tile, num_q_blocks, batch_size, num_heads, NUM_XCDS: tl.constexpr):
    """Identity (naive block-first): heads cycle fastest, then batch, q block slowest."""
    return tile // (batch_size * num_heads), (tile // num_heads) % batch_size, tile % num_heads


@triton.jit
def kv_order(step, n_steps, local_tile, NUM_XCDS: tl.constexpr):
    """sawtooth: forward on even local tiles, backward on odd ones (each scan starts where the last ended)"""
    return tl.where(local_tile % 2 == 0, step, n_steps - 1 - step)
