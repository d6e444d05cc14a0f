#!/usr/bin/env bash
# Issue 16 on an NVIDIA GPU: the persistent FA2 and its loop orders, checked, measured and optimized.
#   1. the kernel's own hooks at every size (python kernels/attention_persistent.py);
#   2. head-first tiles with the sawtooth order through `swizzleperf check` (every size on the GPU,
#      causal ones included);
#   3. ncu (`profile --profiler ncu`) of the cyclic and the sawtooth order at SIZES (default
#      h100_1x128k: the largest shape the simulator takes here; h100_8x128k: the issue's);
#   4. `optimize --profiler ncu` at OPTIMIZE_SIZE (default h100_8x128k, the issue's shape) with the
#      offline search (it proposes every remap family with and without the sawtooth);
#   5. do_bench of every schedule against kernels/attention.py (bench_persistent.py).
# Usage:  OUT=dir [STEPS="1 2 3 4 5"] [SIZES="h100_1x128k h100_8x128k"] [OPTIMIZE_SIZE=h100_8x128k] \
#             benchmarks/persistent/gpu_sawtooth.sh
# The checks' children run `python -I` (isolated: PYTHONPATH is ignored), so swizzleperf and its
# dependencies must be importable without it: installed, or named by a .pth file in site-packages
# (on the lent H100: `printf '/tmp/site\n%s\n' "$PWD" > "$(python3 -c 'import site; print(site.getsitepackages()[0])')/sp.pth"`).
set -uo pipefail
cd "$(dirname "$0")/../.."
source benchmarks/gpu_env.sh
kernel=kernels/attention_persistent.py
mkdir -p "$OUT"
"$python" - "$OUT" <<'PY'
import sys
from pathlib import Path
from swizzleperf.remaps.families import FamilyInstance
from swizzleperf.kernel.contract import load_kernel
k = load_kernel("kernels/attention_persistent.py")
for name, inst in {"sawtooth": FamilyInstance("identity", (), "sawtooth"),
                   "head_first": FamilyInstance("head_first"),
                   "head_first_sawtooth": FamilyInstance("head_first", (), "sawtooth")}.items():
    (Path(sys.argv[1]) / f"{name}.py").write_text(inst.render(k.hook, k.loop_order))
PY
status=0
for step in ${STEPS:-1 2 3 4 5}; do
    echo "=== step $step $(date -u +%H:%M:%S)"
    case $step in
        1) "$python" $kernel ;;
        2) "$python" -m swizzleperf check $kernel --remap "$OUT/head_first_sawtooth.py" --seeds 1 ;;
        3) for size in ${SIZES:-h100_1x128k h100_8x128k}; do
               remap="$OUT/sawtooth.py"; [ "$size" = h100_8x128k ] && remap="$OUT/head_first_sawtooth.py"
               "$python" -m swizzleperf profile $kernel --size "$size" --profiler ncu --remap "$remap" \
                   --json "$OUT/ncu-$size.json"
           done ;;
        4) "$python" -m swizzleperf optimize $kernel --profiler ncu --size "${OPTIMIZE_SIZE:-h100_8x128k}" -n 7 --patience 7 \
               --no-library --runs-dir "$OUT/runs" ;;
        5) "$python" benchmarks/persistent/bench_persistent.py ;;
    esac 2>&1 | tee "$OUT/step$step.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
exit $status
