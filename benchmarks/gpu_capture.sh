#!/usr/bin/env bash
# `swizzleperf capture` on a GPU: the corpus packages' own tests run on the GPU (their autotuner
# benchmarks for real, `warmup` compiles, the driver is the real one), each kernel file is checked
# there, and everything comes back in one archive to be replayed on the CPU interpreter.
#
# Usage (on the GPU machine, repository root; carry .gpu from benchmarks/gpu_wheels.sh):
#   OUT=/path benchmarks/gpu_capture.sh          -> $OUT/captured.tar.gz, $OUT/capture.log
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the directory for the results}"
source benchmarks/gpu_env.sh
work="$(mktemp -d)"
log="$OUT/capture.log"
for spec in "tunedmm" "persistsoftmax" "pagedattn" "xcdgemm gemm_kernel" "rowops" "moeops grouped_gemm_kernel"; do
    set -- $spec
    project="$1" kernel="${2:-}"
    echo "=== $project ${kernel}" >>"$log"
    (cd "tests/fixtures/packages/$project" && "$python" -m swizzleperf capture ${kernel:+--kernel "$kernel"} \
        -o "$work/$project.py" -- python -m pytest -q -p no:cacheprovider tests/) >>"$log" 2>&1
    echo "capture exit $?" >>"$log"
    "$python" -m swizzleperf check "$work/$project.py" >>"$log" 2>&1
    echo "check exit $?" >>"$log"
done
tar -C "$work" -czf "$OUT/captured.tar.gz" .
