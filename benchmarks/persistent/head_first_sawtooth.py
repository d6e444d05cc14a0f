"""A candidate for kernels/attention_persistent.py with both hooks: head-first tiles, the sawtooth K/V order.

    swizzleperf check kernels/attention_persistent.py --remap benchmarks/persistent/head_first_sawtooth.py
"""

import triton
import triton.language as tl


@triton.jit
def swizzle(tile, num_q_blocks, batch_size, num_heads, NUM_XCDS: tl.constexpr):
    """Naive head-first: all q blocks of one head consecutively, striped over the dies."""
    unit = tile // num_q_blocks
    return tile % num_q_blocks, unit // num_heads, unit % num_heads


@triton.jit
def kv_order(step, n_steps, local_tile, NUM_XCDS: tl.constexpr):
    """sawtooth: forward on even local tiles, backward on odd ones (each scan starts where the last ended)"""
    return tl.where(local_tile % 2 == 0, step, n_steps - 1 - step)
