"""The bijectivity stage's second half: a z3 proof for every grid size, beside the sampled check.

The sampled check evaluates a hook on a few dozen grids, so a remap wrong only on a grid nobody
sampled (grid 1000001, num_pid_m == 33, program 2**20) passes it. The prover
(swizzleperf.validation.proofs.entry) covers every grid of up to 2**31 - 1 programs and every preset die count,
in a confined child, within a budget of counted work. Its verdicts are deterministic (work, not
seconds), so they are cached per hook text: the search proposes the same family instances again
and again. Without z3 the sampled check still runs and every verdict says how to get the proof.
"""

from __future__ import annotations

import importlib.util
import re

from swizzleperf.kernel.contract import HookSignature
from swizzleperf.validation.proofs.entry import DEFAULT_DIE_COUNTS, ProofVerdict, prove_bijective

PROOF_LIMIT_S = 2.0  # one candidate's proof: this many seconds of z3 work on an unloaded core
INSTALL_NOTE = "install swizzleperf[proofs] to prove for all grid sizes"
_CACHE_ENTRIES = 256
_cache: dict[tuple, ProofVerdict] = {}


def z3_installed() -> bool:
    return importlib.util.find_spec("z3") is not None


def proof_die_counts(constexprs: dict[str, int]) -> list[int]:
    """Every preset die count, and the run's own if it is another."""
    return sorted({*DEFAULT_DIE_COUNTS, *(int(v) for v in constexprs.values() if int(v) >= 1)})


def prove_remap(source: str, hook: HookSignature, constexprs: dict[str, int],
                limit_s: float = PROOF_LIMIT_S, in_child: bool = True) -> ProofVerdict | None:
    """The hook's proof verdict (in a confined child unless told otherwise), or None without z3."""
    if not z3_installed():
        return None
    dies = tuple(proof_die_counts(constexprs))
    key = (source, hook, dies, limit_s)
    if key not in _cache:
        if len(_cache) >= _CACHE_ENTRIES:
            _cache.pop(next(iter(_cache)))
        _cache[key] = prove_bijective(source, hook, die_counts=dies, time_limit_s=limit_s, in_child=in_child)
    return _cache[key]


def proof_sentence(verdict: ProofVerdict | None, grids_tested: int) -> str:
    """What is known beyond the sampled grids, in one clause (for messages, reports, docstrings)."""
    if verdict is None:
        return f"tested on {grids_tested} grids; {INSTALL_NOTE}"
    if verdict.status == "proven":
        how = f"; {_how_cut(verdict.method)}" if verdict.method else ""
        return (f"proven bijective for all grid sizes (z3: every grid of up to {verdict.max_programs:,} programs, "
                f"die counts {', '.join(map(str, verdict.die_counts))}{how})")
    if verdict.status == "counterexample":
        return verdict.message
    if verdict.proven_max_programs:
        return (f"proven bijective for every grid of up to {verdict.proven_max_programs:,} programs (z3); on larger "
                f"grids an int32 intermediate wraps: {verdict.reason}")
    return f"not proven for all grid sizes within the time budget ({verdict.reason}); tested on {grids_tested} grids"


def unproven_reason(verdict: ProofVerdict | None, needed_programs: int) -> str | None:
    """Why a verdict does not cover every grid of up to `needed_programs` programs (the kernel's largest
    declared grid), or None where it does: what --allow-unproven is asked to accept."""
    if verdict is None:
        return f"nothing beyond the sampled grids is proven: {INSTALL_NOTE}"
    bound = verdict.max_programs if verdict.status == "proven" else verdict.proven_max_programs
    if bound and bound >= needed_programs:
        return None
    if bound:
        return (f"proven only for grids of up to {bound:,} programs, fewer than the kernel's largest declared grid "
                f"({needed_programs:,})")
    return f"not proven for every grid within the time budget ({verdict.reason})"


def _how_cut(method: str) -> str:
    """How a proof was cut, without the timings: the method's first clause, and a split by cases inside a part
    ("in two halves through `lid`, the order by cases on `pid < rounds_end`")."""
    head, _, parts = method.partition(":")
    cases = re.search(r"by cases on `[^`]+`", parts)
    return f"{head}, the order {cases.group(0)}" if cases else head


def proof_tag(data: dict) -> str:
    """A few words for an accepted attempt's row in report.md, from its bijectivity stage data."""
    verdict, grids = data.get("proof"), len(data.get("grids", []))
    if verdict is not None and verdict.get("status") == "proven":
        return "proven for all grid sizes (z3)"
    if verdict is not None and verdict.get("proven_max_programs"):
        return f"proven for grids of up to {verdict['proven_max_programs']:,} programs (z3; int32 wraps beyond)"
    if verdict is not None:
        return f"not proven for all grid sizes; tested on {grids} grids"
    return f"tested on {grids} grids (no z3)" if "proof_text" in data else f"tested on {grids} grids"


def docstring_line(verdict: dict | None, grids: list, asked: bool = True) -> str:
    """The line best/remap.py carries, from a recorded verdict (JSON) and the sampled grids;
    `asked`: whether a proof was attempted (records from before the prover have none)."""
    if verdict is not None and verdict.get("status") == "proven":
        return f"Proven bijective for all grid sizes (z3), die counts {', '.join(map(str, verdict['die_counts']))}."
    if verdict is not None and verdict.get("proven_max_programs"):
        return (f"Proven bijective for every grid of up to {verdict['proven_max_programs']:,} programs (z3); an "
                f"int32 intermediate wraps on larger grids.")
    tested = ", ".join("x".join(map(str, g)) for g in grids)
    if not asked:
        return f"Proven bijective on grids: {tested}."
    why = "not proven for all grid sizes within the time budget" if verdict else INSTALL_NOTE
    return f"Tested bijective on grids: {tested} ({why})."
