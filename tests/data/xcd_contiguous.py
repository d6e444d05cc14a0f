import triton
import triton.language as tl


@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    """XCD-contiguous: each die runs one contiguous range of logical ids."""
    count = num_pids
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    q = (count + NUM_XCDS - 1) // NUM_XCDS
    tall = count - (q - 1) * NUM_XCDS
    if xcd < tall:
        lid = xcd * q + local
    else:
        lid = tall * q + (xcd - tall) * (q - 1) + local
    return lid
