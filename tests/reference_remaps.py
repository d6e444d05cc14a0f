"""Remap sources the kernel tests share, written by hand from the families' definitions.

Kept apart from swizzleperf.remaps.families on purpose: a test should not check the kernels with the
same code that the search proposes.
"""

NUM_XCDS = 8

# Launch ids xcd, xcd + N, xcd + 2N, ... all run on one XCD; give them one contiguous logical
# range. The first `tall` XCDs take q = ceil(G / N) ids, the others q - 1.
_XCD_CONTIGUOUS = """\
    q = (num_pids + NUM_XCDS - 1) // NUM_XCDS
    tall = num_pids - (q - 1) * NUM_XCDS
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    logical = tl.where(xcd < tall, xcd * q + local, tall * q + (xcd - tall) * (q - 1) + local)
"""
_HEAD_1D = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n"
_HEAD_2D = "@triton.jit\ndef swizzle(pid, num_pid_m, num_pid_n, NUM_XCDS: tl.constexpr):\n    num_pids = num_pid_m * num_pid_n\n"

XCD_CONTIGUOUS_1D = f"{_HEAD_1D}{_XCD_CONTIGUOUS}    return logical\n"
# 2D: XCD-contiguous on the linear id, then row-major.
XCD_ROW_MAJOR_2D = f"{_HEAD_2D}{_XCD_CONTIGUOUS}    return logical // num_pid_n, logical % num_pid_n\n"
# 2D: XCD-contiguous on the linear id, then a GROUP_M = 4 raster (4 tile rows walked column by
# column); the check sizes leave partial groups at the bottom.
XCD_GROUPED_2D = f"""{_HEAD_2D}{_XCD_CONTIGUOUS}    per_group = 4 * num_pid_n
    first_m = (logical // per_group) * 4
    group_rows = tl.minimum(num_pid_m - first_m, 4)
    return first_m + (logical % per_group) % group_rows, (logical % per_group) // group_rows
"""

# The naive version: a bijection only when N divides G; otherwise some logical ids come twice.
_NAIVE = "(pid % NUM_XCDS) * (num_pids // NUM_XCDS) + pid // NUM_XCDS"
NAIVE_REMAP = {
    1: f"{_HEAD_1D}    return {_NAIVE}\n",
    2: f"{_HEAD_2D}    logical = {_NAIVE}\n    return logical // num_pid_n, logical % num_pid_n\n",
}
