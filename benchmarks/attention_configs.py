"""Launch configurations of kernels/attention.py on a GPU: block sizes, warps, stages.

    python benchmarks/attention_configs.py [--size mha128_16k]

A remap's speedup depends on how close the kernel runs to its compute limit, so the kernel's
own configuration matters to an honest comparison. For each configuration this compiles the
kernel, checks it against the reference on the first one, and prints do_bench medians for the
identity (block-first) remap and head-first, with TFLOP/s and the ratio. GPU only.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import tempfile
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from swizzleperf.kernel.contract import load_kernel  # noqa: E402
from swizzleperf.remaps.families import FAMILIES  # noqa: E402

CONFIGS = [(128, 64, 8, None), (128, 64, 8, 4), (128, 128, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3)]


def variant(text: str, block_m: int, block_n: int, warps: int, stages: int | None, hook: str) -> str:
    text = re.sub(r"^BLOCK_M, BLOCK_N = \d+, \d+$", f"BLOCK_M, BLOCK_N = {block_m}, {block_n}", text, flags=re.M)
    stage = "" if stages is None else f', "num_stages": {stages}'
    text = text.replace('config = {"num_warps": 8 if dim >= 64 else 4}', f'config = {{"num_warps": {warps}{stage}}}')
    return text


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="mha128_16k")
    args = parser.parse_args()
    kernel = load_kernel(ROOT / "kernels/attention.py")
    hooks = {"block-first (identity)": kernel.hook_source, "head-first": FAMILIES["head_first"](kernel.hook)}
    size = kernel.size(args.size)
    flops = 4 * size["batch"] * size["heads"] * size["seq"] ** 2 * size["head_dim"] * (0.5 if size["causal"] else 1)
    print(f"{torch.cuda.get_device_name()} triton {triton.__version__}; size {args.size} {size}")
    with tempfile.TemporaryDirectory() as tmp:
        for n, (bm, bn, warps, stages) in enumerate(CONFIGS):
            times = {}
            for label, hook in hooks.items():
                path = Path(tmp) / f"attn_{n}_{len(times)}.py"
                path.write_text(variant(kernel.with_hook(hook), bm, bn, warps, stages, hook))
                try:
                    module = load(path)
                    inputs = module.make_inputs(size, 0, "cuda")
                    outputs = module.make_outputs(size, "cuda")
                    run = lambda: module.launch(inputs, outputs, size, 1)  # noqa: E731
                    run()
                    if n == 0:
                        ref = module.reference(inputs, size)
                        for key in ref:
                            torch.testing.assert_close(outputs[key].float(), ref[key].float(), **module.TOLERANCE)
                    times[label] = triton.testing.do_bench(run, warmup=5, rep=400, return_mode="median")
                except Exception as exc:  # a configuration that does not compile or fit
                    times[label] = None
                    print(f"  BM={bm} BN={bn} warps={warps} stages={stages} {label}: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:120]}")
            if all(times.values()):
                base, head = times["block-first (identity)"], times["head-first"]
                print(f"BM={bm:3d} BN={bn:3d} warps={warps} stages={stages}: block-first {base:8.3f} ms "
                      f"({flops / base / 1e9:5.0f} TFLOP/s), head-first {head:8.3f} ms "
                      f"({flops / head / 1e9:5.0f} TFLOP/s), ratio {base / head:.3f}", flush=True)


if __name__ == "__main__":
    main()
