"""The prover's child-process entry point (swizzleperf.untrusted.sandbox.run_in_child).

The child is confined by swizzleperf.untrusted.isolation (address space, CPU time, no network) before it
reads the payload; z3 is also told its own memory limit, so a formula that grows stops with
"unknown" rather than with the address-space limit.
"""

from __future__ import annotations

from pathlib import Path

Z3_MEMORY_MB = 1536
CHILD_PRELOAD = ("z3", "swizzleperf.validation.proofs.entry")  # imported once by the fork server


def prove_child(payload: dict, workdir: Path) -> dict:
    import z3

    from swizzleperf.kernel.contract import HookSignature
    from swizzleperf.validation.proofs.encoding import SizedHook
    from swizzleperf.validation.proofs.entry import prove_in_process

    z3.set_param("memory_max_size", Z3_MEMORY_MB)
    spec = payload["hook"]
    fields = dict(name=spec["name"], pid=spec["pid"], grid_params=tuple(spec["grid_params"]),
                  constexprs=tuple(spec["constexprs"]))
    hook = SizedHook(**fields, sizes=tuple(spec["sizes"])) if spec.get("sizes") else HookSignature(**fields)
    verdict = prove_in_process(payload["source"], hook, payload["die_counts"], float(payload["time_limit_s"]),
                               int(payload["max_programs"]))
    return verdict.model_dump(mode="json")
