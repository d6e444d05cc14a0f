"""Time the z3 bijectivity proof of every remap the search can propose (issue 13: under a second each).

    .venv/bin/python benchmarks/bench_proofs.py [--limit 10] [--family xcd_grouped ...] [--one]

Every distinct instance candidate_space renders for a multi-die preset (mi300x: the hook reads
NUM_XCDS, so all die counts 1, 2, 4, 8, 16 are proven) and a one-L2 preset (h100: literal die
counts), in 1D, 2D and 3D, proven in this process for every grid of up to 2**31 - 1 programs.
Printed per family: instances, verdicts, and the median and largest seconds per instance, wall
clock and CPU (this process's, one solver thread; on a loaded machine the CPU time is the fairer
figure); then the instances over a second. --one proves only the first instance of each family
and preset.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.remaps.space import candidate_space
from swizzleperf.validation.proofs.entry import prove_bijective

HOOKS = (HookSignature("swizzle", "pid", ("num_pids",), ("NUM_XCDS",)),
         HookSignature("swizzle", "pid", ("num_pid_m", "num_pid_n"), ("NUM_XCDS",)),
         HookSignature("swizzle", "pid", ("num_q_blocks", "batch_size", "num_heads"), ("NUM_XCDS",)))


def instances(families: set[str] | None, one: bool):
    """(family, label, hook, source) for every distinct rendered instance."""
    seen = set()
    for hw in ("mi300x", "h100"):
        for hook in HOOKS:
            for family, members in candidate_space(hook, PRESETS[hw]).items():
                if families and family not in families:
                    continue
                for instance in members[:1] if one else members:
                    source = instance.render(hook)
                    if source not in seen:
                        seen.add(source)
                        yield family, f"{hw} {instance.label}", hook, source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=10.0, help="solver seconds per instance")
    parser.add_argument("--family", nargs="*", help="only these families")
    parser.add_argument("--one", action="store_true", help="the first instance of each family and preset")
    args = parser.parse_args()
    times, cpu, verdicts, slow = defaultdict(list), defaultdict(list), defaultdict(lambda: defaultdict(int)), []
    for family, label, hook, source in instances(set(args.family or ()), args.one):
        started, started_cpu = time.perf_counter(), time.process_time()
        verdict = prove_bijective(source, hook, time_limit_s=args.limit, in_child=False)
        seconds = time.perf_counter() - started
        times[family].append(seconds)
        cpu[family].append(time.process_time() - started_cpu)
        verdicts[family][verdict.status] += 1
        if seconds > 1.0 or not verdict.proven:
            slow.append(f"  {label}: {seconds:.2f} s, {verdict.message}")
    print(f"{'family':<22} {'n':>4} {'median s':>9} {'max s':>7} {'median cpu':>11} {'max cpu':>8}  verdicts")
    for family, spent in times.items():
        counts = ", ".join(f"{k} {v}" for k, v in sorted(verdicts[family].items()))
        print(f"{family:<22} {len(spent):>4} {statistics.median(spent):>9.2f} {max(spent):>7.2f} "
              f"{statistics.median(cpu[family]):>11.2f} {max(cpu[family]):>8.2f}  {counts}")
    total = sum(len(t) for t in times.values())
    print(f"{total} instances, {sum(map(sum, times.values())):.1f} s in all")
    if slow:
        print("over a second or not proven:\n" + "\n".join(slow))


if __name__ == "__main__":
    main()
