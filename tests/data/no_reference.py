"""A kernel file without reference() or TOLERANCE: a remap must reproduce the kernel itself, exactly.

MIX_LAUNCH_ID = True makes the store use the launch-order id, so that any remap but the identity
changes the output (a kernel whose programs are not independent of the order they launch in)."""
import torch
import triton
import triton.language as tl

MIX_LAUNCH_ID = False


@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    return pid


@triton.jit
def scale_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr, MIX: tl.constexpr, NUM_XCDS: tl.constexpr):
    launch = tl.program_id(0)
    pid = swizzle(launch, tl.num_programs(0), NUM_XCDS)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + pid * BLOCK + offs)
    where = launch if MIX else pid
    tl.store(y_ptr + where * BLOCK + offs, 3 * x + 1)


REMAP_HOOK = "swizzle"
SIZES = {"tiny": {"blocks": 24}, "medium": {"blocks": 256}, "big": {"blocks": 4096}}
DEFAULT_SIZE = "tiny"
CHECK_SIZES = ["tiny"]
BLOCK = 16


def grid(size):
    return (size["blocks"],)


def make_inputs(size, seed, device):
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(size["blocks"] * BLOCK, generator=g).to(device)}


def make_outputs(size, device):
    return {"y": torch.empty(size["blocks"] * BLOCK, device=device)}


def launch(inputs, outputs, size, num_xcds):
    scale_kernel[grid(size)](inputs["x"], outputs["y"], BLOCK=BLOCK, MIX=MIX_LAUNCH_ID, NUM_XCDS=num_xcds)
