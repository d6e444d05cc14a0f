#!/usr/bin/env bash
# Validate the real-hardware path on an NVIDIA GPU (written for H100): for the identity remap of
# kernels/softmax.py and kernels/gemm.py, at each kernel's largest check size and its default
# size, run
#   - the ncu profiler (NcuProfiler.profile: ncu around the runner child),
#   - the timer (time_kernel) with a flushed and a warm L2,
#   - triton.testing.do_bench in this process on the same launch, as a cross-check of the timer,
# and write one JSON per (kernel, size) plus ncu's raw CSV to $OUT. Prints one line per result.
#
# Usage:  OUT=/path/to/dir benchmarks/gpu_validate.sh
#   PYTHON       interpreter with torch (CUDA) and triton (default: python3)
#   KERNELS      kernel names under kernels/ (default: "softmax gemm")
#   SIZES        size names to use for every kernel (default: largest check size + default size)
#   SWIZZLEPERF_WHEELHOUSE  a directory of wheels (e.g. pydantic, pyyaml for this Python) to install
#                offline into $OUT/.deps when the machine lacks them; no network is used.
# Needs: ncu on PATH, permission to read GPU counters. Exit status is non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${OUT:?set OUT to the directory for the results}"
mkdir -p "$OUT/raw"
python="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the checkout itself; no install needed
unset TRITON_INTERPRET  # the CPU interpreter would hide every kernel from ncu

missing="$("$python" -c '
import importlib.util
need = ["torch", "triton", "numpy", "pydantic", "yaml"]
print(" ".join(m for m in need if importlib.util.find_spec(m) is None))')"
if [ -n "$missing" ]; then
    if [ -n "${SWIZZLEPERF_WHEELHOUSE:-}" ]; then
        echo "gpu_validate: installing $missing from $SWIZZLEPERF_WHEELHOUSE (offline) into $OUT/.deps"
        pkgs="${missing/yaml/pyyaml}"
        # shellcheck disable=SC2086  # one argument per package
        "$python" -m pip install --quiet --no-index --find-links "$SWIZZLEPERF_WHEELHOUSE" --target "$OUT/.deps" $pkgs
        export PYTHONPATH="$PYTHONPATH:$OUT/.deps"
    else
        echo "gpu_validate: $python lacks: $missing. Install them, or set SWIZZLEPERF_WHEELHOUSE to a directory" \
             "of wheels for this Python (pip download --only-binary=:all: pydantic pyyaml -d DIR)." >&2
        exit 2
    fi
fi
command -v ncu >/dev/null || { echo "gpu_validate: ncu is not on PATH" >&2; exit 2; }

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo unknown)"
    echo "ncu: $(command -v ncu) $(ncu --version 2>/dev/null | tail -n 1)"
    "$python" -c 'import sys, torch, triton; print(f"python {sys.version.split()[0]} torch {torch.__version__} (cuda {torch.version.cuda}) triton {triton.__version__}")'
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
} | tee "$OUT/environment.txt"

status=0
"$python" - "$OUT" <<'PY' || status=$?
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import triton.testing

from swizzleperf.errors import SwizzlePerfError
from swizzleperf.hardware.spec import PRESETS, detect
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.profilers.ncu import NcuProfiler
from swizzleperf.profilers.timer import time_kernel

out = Path(sys.argv[1])
if not torch.cuda.is_available():
    sys.exit("gpu_validate: torch sees no CUDA GPU")
hw = detect() or PRESETS["h100"]
print(f"hardware: {hw.describe()}")
failures = 0


def in_process_do_bench(kernel, size_name: str) -> dict:
    """triton.testing.do_bench on the same launch, in this process (the timer runs it in a child)."""
    size = kernel.size(size_name)
    inputs = kernel.fn("make_inputs")(size, 0, "cuda")
    outputs = kernel.fn("make_outputs")(size, "cuda")
    launch = kernel.fn("launch")
    median, p20, p80 = triton.testing.do_bench(lambda: launch(inputs, outputs, size, hw.num_domains),
                                               quantiles=[0.5, 0.2, 0.8])
    del inputs, outputs
    torch.cuda.empty_cache()
    return {"median_ms": median, "p20_ms": p20, "p80_ms": p80}


for name in os.environ.get("KERNELS", "softmax gemm").split():
    path = Path("kernels") / f"{name}.py"
    if not path.exists():
        print(f"{name}: SKIPPED, {path} does not exist")
        continue
    kernel = load_kernel(path)
    sizes = os.environ.get("SIZES", "").split() or list(dict.fromkeys([kernel.check_sizes[-1], kernel.default_size]))
    for size in sizes:
        record = {"kernel": name, "size": size, "size_params": kernel.size(size), "hardware": hw.model_dump(),
                  "remap": "identity (the file's own hook)"}
        started = time.time()
        try:
            report = NcuProfiler(hw, raw_dir=out / "raw").profile(kernel, kernel.hook_source, size)
            record["ncu_report"] = json.loads(report.model_dump_json())
            flushed = time_kernel(kernel, kernel.hook_source, size, repeats=100, l2="flushed", num_xcds=hw.num_domains)
            warm = time_kernel(kernel, kernel.hook_source, size, repeats=100, l2="warm", num_xcds=hw.num_domains)
            record["timer_flushed"] = flushed.model_dump()
            record["timer_warm"] = warm.model_dump()
            record["do_bench_in_process"] = bench = in_process_do_bench(kernel, size)
            record["timer_vs_do_bench_median"] = flushed.median_ms / bench["median_ms"]
            record["flushed_over_warm_median"] = flushed.median_ms / warm.median_ms
            print(f"{name} {size}: {report.summary()}; DRAM read {report.bytes_from_next_level} B; timer flushed "
                  f"{flushed.median_ms:.4f} ms [{flushed.p20_ms:.4f}, {flushed.p80_ms:.4f}], warm "
                  f"{warm.median_ms:.4f} ms; do_bench {bench['median_ms']:.4f} ms "
                  f"(timer/do_bench {record['timer_vs_do_bench_median']:.3f})")
        except (SwizzlePerfError, RuntimeError) as exc:
            failures += 1
            record["error"] = f"{type(exc).__name__}: {exc}"
            record["traceback"] = traceback.format_exc()
            print(f"{name} {size}: FAILED {record['error']}")
        record["elapsed_s"] = round(time.time() - started, 1)
        (out / f"{name}-{size}.json").write_text(json.dumps(record, indent=2))

sys.exit(1 if failures else 0)
PY

if "$python" -c 'import pytest' 2>/dev/null; then
    # The opt-in GPU tests of the profilers (the CPU ones need fixtures only and run in CI).
    "$python" -m pytest -q tests/profilers/test_profilers.py -m "gpu or ncu" -p no:cacheprovider 2>&1 \
        | tee "$OUT/pytest_gpu.txt" || status=1
fi
echo "gpu_validate: results in $OUT"
exit "$status"
