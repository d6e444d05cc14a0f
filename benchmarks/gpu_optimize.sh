#!/usr/bin/env bash
# The real-hardware loop on an NVIDIA GPU: `swizzleperf optimize KERNEL --profiler ncu` with the
# offline search proposer, for each kernel, each attempt profiled by ncu (--cache-control all)
# and timed with do_bench semantics (L2 flushed). Run directories and logs go to $OUT.
#
# Usage:  OUT=dir [KERNELS="softmax gemm"] [ITERATIONS=3] [SIZE=] [PER_KERNEL_TIMEOUT=280] \
#             benchmarks/gpu_optimize.sh
# Needs torch (CUDA), triton and ncu; swizzleperf from this checkout, importable by `python -I` (gpu_env.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
source benchmarks/gpu_env.sh
{
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    echo "ncu: $(command -v ncu) $(ncu --version 2>/dev/null | tail -n 1)"
    "$python" -c 'import sys, torch, triton; print(f"python {sys.version.split()[0]} torch {torch.__version__} triton {triton.__version__}")'
    "$python" -m swizzleperf hw
} 2>&1 | tee "$OUT/env.txt"
status=0
for kernel in ${KERNELS:-softmax gemm}; do
    echo "=== $kernel"
    size_arg=()
    [ -n "${SIZE:-}" ] && size_arg=(--size "$SIZE")
    timeout "${PER_KERNEL_TIMEOUT:-280}" "$python" -m swizzleperf optimize "kernels/$kernel.py" --profiler ncu \
        -n "${ITERATIONS:-3}" --patience "${ITERATIONS:-3}" --no-library --runs-dir "$OUT/runs" "${size_arg[@]}" \
        2>&1 | tee "$OUT/$kernel.log" || status=1
done
tar czf "$OUT/runs.tgz" -C "$OUT" runs 2>/dev/null
rm -rf "$OUT/runs"
exit $status
