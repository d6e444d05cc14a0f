"""L2 read misses and DRAM reads of the persistent FA2, cyclic vs sawtooth K/V order (under ncu).

    python benchmarks/persistent/ncu_sawtooth.py [HEADS SEQ]      # runs ncu on itself

Head-first tile order (a head's Q blocks run together, so its K/V is what the L2 holds), bf16,
D = 128, non-causal, batch 1. Prints per order: srcunit_tex read lookup misses (sectors), DRAM
bytes read and the kernel's duration, then the sawtooth's change.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
METRICS = ("lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum", "dram__bytes_read.sum", "gpu__time_duration.sum")


def child(heads: int, seq: int) -> None:
    import torch

    sys.path.insert(0, str(HERE))
    from attention_persistent import attention_persistent

    q, k, v = (torch.randn(1, heads, seq, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for sawtooth in (False, True):
        attention_persistent(q, k, v, False, sawtooth_order=sawtooth, head_first_order=True)
    torch.cuda.synchronize()


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        child(int(sys.argv[2]), int(sys.argv[3]))
        return 0
    heads, seq = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (8, 131072)
    sys.path.insert(0, str(ROOT))
    from swizzleperf.profilers.ncu import parse_ncu_csv

    done = subprocess.run(["ncu", "--csv", "--print-units", "base", "--metrics", ",".join(METRICS),
                           "--cache-control", "all", "--kernel-name", "regex:attention_persistent", sys.executable,
                           __file__, "--child", str(heads), str(seq)], capture_output=True, text=True, check=True)
    launches = parse_ncu_csv(done.stdout, "attention_persistent").launches
    rows = {name: launch.metrics for name, launch in zip(("cyclic", "sawtooth"), launches)}
    print(f"{heads} heads x {seq} tokens, D 128, bf16, non-causal, head-first tiles (ncu, --cache-control all)")
    for name, m in rows.items():
        print(f"  {name:9s} L2 read misses {m[METRICS[0]] / 1e6:8.1f} M sectors  DRAM read {m[METRICS[1]] / 1e9:6.2f} GB  "
              f"time {m[METRICS[2]] / 1e6:8.2f} ms")
    c, s = rows["cyclic"], rows["sawtooth"]
    print(f"  sawtooth: read misses {100 * (s[METRICS[0]] / c[METRICS[0]] - 1):+.1f} %, DRAM "
          f"{100 * (s[METRICS[1]] / c[METRICS[1]] - 1):+.1f} %, time {100 * (s[METRICS[2]] / c[METRICS[2]] - 1):+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
