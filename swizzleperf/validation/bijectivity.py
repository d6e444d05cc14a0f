"""The bijectivity check: a remap evaluated on many grids (in a child) and, beside it, proven.

A remap must be a bijection on every grid the kernel is launched with, or programs are skipped
or run twice. `bijectivity_grids` adds the sizes that catch the usual bugs (fewer programs than
dies, counts the die count does not divide, primes, one ~1M grid) to the kernel's own;
`check_bijective` evaluates the candidate on them in a confined child process and adds the z3
proof's verdict for every grid size (swizzleperf.validation.proofs.entry).
"""

from __future__ import annotations

import ast
import math
import time
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from swizzleperf.errors import ChildSetupError, RemapRejected, SandboxError
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.remaps.check import static_check
from swizzleperf.untrusted.isolation import CPU_CHILD_MEMORY_MB, Confinement
from swizzleperf.untrusted.sandbox import run_in_child
from swizzleperf.validation.proofs.verdict import ProofVerdict

# The evaluating child's address-space limit: the suite's hooks peak at 190-225 MB on their ~1M-program
# grids (70-106 MB resident), so this leaves room for many intermediates and keeps any candidate under 1 GB.

_PRIMES = (97, 1009, 65537)
_LARGE_1D = 1_000_003  # prime, ~1M programs


def bijectivity_grids(hook: HookSignature, declared_grids: list[tuple[int, ...]],
                      num_domains: int) -> list[tuple[int, ...]]:
    """The kernel's declared grids, then extra grids that catch the usual remap bugs, small first.

    1D: fewer programs than dies, equal, counts the die count does not divide (N+1, 2N+3, ...),
    primes, and one ~1M grid. 2D and 3D: analogous shapes, thin, square and coprime extents.
    """
    n = max(1, num_domains)
    if hook.ndim == 1:
        extra = [(g,) for g in (1, 2, n - 1, n, n + 1, 2 * n, 2 * n + 3, 3 * n - 1, n * n + 1, *_PRIMES, _LARGE_1D)]
    elif hook.ndim == 2:
        extra = [(1, 1), (1, 7), (7, 1), (3, 5), (n, n), (n + 1, n - 1), (1, n + 1), (2 * n + 3, 3), (13, 17),
                 (31, 29), (1000, 1000)]
    else:
        base = [(1,) * hook.ndim, (2, 3, 5), (n, 3, 7), (3, n + 1, 5), (7, 11, 13), (100, 100, 101)]
        extra = [g[:hook.ndim] + (1,) * (hook.ndim - len(g)) for g in base]
    grids: list[tuple[int, ...]] = []
    for grid in [tuple(int(v) for v in g) for g in declared_grids] + sorted(extra, key=math.prod):
        if len(grid) == hook.ndim and min(grid) >= 1 and grid not in grids:
            grids.append(grid)
    return grids


class BijectivityFailure(BaseModel):
    """The first grid on which a remap is not a bijection, and the evidence."""

    model_config = ConfigDict(extra="forbid")
    grid: tuple[int, ...] | None = Field(description="None when the evaluation as a whole failed")
    kind: Literal["evaluation", "out_of_range", "not_one_to_one", "sandbox", "counterexample"]
    message: str
    programs: list[int] = Field(default_factory=list, description="launch ids that collide or leave the grid")
    logical: tuple[int, ...] | None = Field(None, description="the logical index they map to")
    missing: tuple[int, ...] | None = Field(None, description="the first logical index no program produces")


class BijectivityReport(BaseModel):
    """Whether a remap is a bijection on each checked grid (stored with the attempt)."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 1
    hook: str
    constexprs: dict[str, int]
    grids: list[tuple[int, ...]] = Field(description="grids checked, in order, up to the first failure")
    failure: BijectivityFailure | None = None
    seconds: float
    proof: ProofVerdict | None = Field(None, description="the z3 proof for every grid size (swizzleperf.validation.proofs.entry)")
    proof_text: str | None = Field(None, description="what is known beyond the sampled grids (proof_status); "
                                                     "None where no proof was asked for")

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def message(self) -> str:
        """One sentence for histories, prompts and the CLI."""
        if self.failure is None:
            sizes = ", ".join(_format_grid(g) for g in self.grids)
            proof = f"; {self.proof_text}" if self.proof_text else ""
            return f"bijective on all {len(self.grids)} grids ({sizes}){proof}"
        return self.failure.message

    def raise_if_failed(self) -> None:
        if self.failure is not None:
            raise RemapRejected("bijectivity", self.failure.message)


def _format_grid(grid: tuple[int, ...]) -> str:
    return f"({grid[0]},)" if len(grid) == 1 else "(" + ", ".join(map(str, grid)) + ")"


def _format_index(index: tuple[int, ...]) -> str:
    return str(index[0]) if len(index) == 1 else "(" + ", ".join(map(str, index)) + ")"


def find_bijectivity_failure(coords: np.ndarray, grid: tuple[int, ...]) -> BijectivityFailure | None:
    """Check one evaluated grid: coords[p] is the logical index launch id p maps to, shape (G, ndim)."""
    size = math.prod(grid)
    label = f"grid {_format_grid(grid)}"
    extents = np.asarray(grid, dtype=np.int64)
    outside = np.flatnonzero(((coords < 0) | (coords >= extents)).any(axis=1))
    if outside.size:
        p = int(outside[0])
        index = tuple(int(v) for v in coords[p])
        return BijectivityFailure(
            grid=grid, kind="out_of_range", programs=[p], logical=index,
            message=f"{label}: program {p} maps to {_format_index(index)}, outside the grid "
                    f"(each index must lie in [0, extent)); {outside.size} program(s) out of range")
    linear = np.ravel_multi_index(tuple(coords.T), grid) if len(grid) > 1 else coords[:, 0]
    counts = np.bincount(linear, minlength=size)
    repeated = np.flatnonzero(counts > 1)
    if not repeated.size:
        return None
    target = int(repeated[0])
    programs = np.flatnonzero(linear == target)[:8].tolist()
    missing = int(np.flatnonzero(counts == 0)[0])
    logical = tuple(int(v) for v in np.unravel_index(target, grid))
    absent = tuple(int(v) for v in np.unravel_index(missing, grid))
    names = ", ".join(map(str, programs[:-1])) + f" and {programs[-1]}"
    more = f" (and {int(counts[target]) - len(programs)} more)" if counts[target] > len(programs) else ""
    verb = "both map" if counts[target] == 2 else "all map"
    n_missing = int((counts == 0).sum())
    return BijectivityFailure(
        grid=grid, kind="not_one_to_one", programs=programs, logical=logical, missing=absent,
        message=f"{label}: programs {names}{more} {verb} to {_format_index(logical)}; "
                f"logical {_format_index(absent)} is never produced ({n_missing} of {size} logical ids missing)")


def _hook_payload(hook: HookSignature) -> dict:
    return {"name": hook.name, "pid": hook.pid, "grid_params": list(hook.grid_params),
            "constexprs": list(hook.constexprs)}


def _evaluate_in_child(source: str, hook: HookSignature, grids: list[tuple[int, ...]],
                       constexprs: dict[str, int], timeout: float, what: str):
    """Coordinates per grid from a child process, and the child's evaluation error if one stopped it."""
    missing = [c for c in hook.constexprs if c not in constexprs]
    if missing:  # a caller's mistake, not the candidate's: fail here rather than in the child
        raise ValueError(f"no value for the hook's constexpr parameter(s) {', '.join(missing)}; pass constexprs=")
    bad = [g for g in grids if len(g) != hook.ndim or min(g) < 1]
    if bad:
        raise ValueError(f"grids {bad} do not fit {hook.render()}: each needs {hook.ndim} positive extent(s)")
    payload = {"source": source, "hook": _hook_payload(hook), "grids": [list(g) for g in grids],
               "constexprs": {k: int(v) for k, v in constexprs.items()}}
    confinement = Confinement(memory_mb=CPU_CHILD_MEMORY_MB, cpu_s=timeout + 10, file_mb=256, network=False, threads=1)
    result = run_in_child("swizzleperf.remaps.evaluate.evaluator:evaluate_grids_child", payload, timeout, what=what,
                          confinement=confinement)
    arrays = []
    for i, grid in enumerate(grids[:int(result.value["evaluated"])]):
        coords = result.arrays.get(f"grid_{i}")
        if coords is None or coords.dtype != np.int64 or coords.shape != (math.prod(grid), hook.ndim):
            raise SandboxError(f"{what} returned no valid result for grid {_format_grid(grid)}")
        arrays.append(coords)
    return arrays, result.value.get("rejected")


def _evaluate_here(fn: ast.FunctionDef, hook: HookSignature, grids: list[tuple[int, ...]],
                   constexprs: dict[str, int]):
    """_evaluate_in_child's result, computed in this process (bounded by the counted work)."""
    from swizzleperf.remaps.evaluate.evaluator import evaluate_checked

    arrays = []
    for grid in grids:
        try:
            arrays.append(evaluate_checked(fn, hook, grid, constexprs))
        except RemapRejected as exc:
            return arrays, {"grid": list(grid), "reason": exc.reason}
    return arrays, None


def check_bijective(source: str, hook: HookSignature, grids: list[tuple[int, ...]],
                    constexprs: dict[str, int], timeout: float = 30.0, prove: bool = True,
                    isolate: bool = True, checked: ast.FunctionDef | None = None) -> BijectivityReport:
    """Evaluate the remap on every grid in a child process and check it is one-to-one and in range;
    then (`prove`) the z3 proof for every grid size, whose counterexample is a failure too.
    `isolate=False` evaluates and proves in this process: nothing is executed either way and the
    counted work bounds the evaluation, but only a child bounds memory and the solver's time.

    Static-check failures and counted work over the budget (swizzleperf.remaps.work) raise
    RemapRejected; everything after (an evaluation error, a collision, a child past its time
    limit) is a failed report, so the loop can record it. `checked`: the hook's tree where the static
    check already ran on `source` (remaps.checked), so it is not parsed again here.
    """
    fn = checked if checked is not None else static_check(source, hook)
    from swizzleperf.remaps.work import BIJECTIVITY_WORK, programs_of, require_work

    require_work(fn, constexprs, programs_of(grids), BIJECTIVITY_WORK, "bijectivity", "the sampled grids")
    t0 = time.perf_counter()
    checked: list[tuple[int, ...]] = []
    failure = None
    try:
        arrays, rejected = _evaluate_in_child(source, hook, grids, constexprs, timeout, "the bijectivity check") \
            if isolate else _evaluate_here(fn, hook, grids, constexprs)
    except ChildSetupError:
        raise  # the installation's fault, not the candidate's
    except SandboxError as exc:
        failure = BijectivityFailure(grid=None, kind="sandbox", message=f"evaluation failed: {exc}")
        arrays, rejected = [], None
    for grid, coords in zip(grids, arrays):
        checked.append(grid)
        failure = find_bijectivity_failure(coords, grid)
        if failure is not None:
            break
    if failure is None and rejected is not None:
        grid = tuple(rejected["grid"])
        checked.append(grid)
        failure = BijectivityFailure(grid=grid, kind="evaluation",
                                     message=f"grid {_format_grid(grid)}: {rejected['reason']}")
    report = BijectivityReport(hook=hook.render(), constexprs=dict(constexprs), grids=checked, failure=failure,
                               seconds=time.perf_counter() - t0)
    return with_proof(report, source, hook, isolate) if prove and failure is None else report


def with_proof(report: BijectivityReport, source: str, hook: HookSignature, isolate: bool = True) -> BijectivityReport:
    """The sampled report with the proof's verdict; a counterexample becomes its failure."""
    from swizzleperf.validation.proof_status import proof_sentence, prove_remap

    verdict = prove_remap(source, hook, report.constexprs, in_child=isolate)
    update = {"proof": verdict, "proof_text": proof_sentence(verdict, len(report.grids)),
              "seconds": report.seconds + (verdict.seconds if verdict else 0.0)}
    if verdict is not None and verdict.counterexample is not None:
        cex = verdict.counterexample
        update["failure"] = BijectivityFailure(grid=cex.grid, kind="counterexample", programs=cex.programs,
                                               logical=cex.logical, message=f"{verdict.message}; found by z3 after "
                                               f"the {len(report.grids)} sampled grids passed")
    return report.model_copy(update=update)


def logical_ids(source: str, hook: HookSignature, grid: tuple[int, ...], constexprs: dict[str, int],
                timeout: float = 30.0) -> np.ndarray:
    """Per launch id, the C-order linear index of the logical coordinates it maps to (int64 [G]).

    Evaluated in a child. Raises RemapRejected when the candidate fails the static check, the
    evaluation, or maps a program outside the grid; SandboxError past the time limit. It does
    not check one-to-one: run check_bijective first.
    """
    static_check(source, hook)
    grid = tuple(int(g) for g in grid)
    arrays, rejected = _evaluate_in_child(source, hook, [grid], constexprs, timeout, "remap evaluation")
    if rejected is not None:
        raise RemapRejected("evaluation", rejected["reason"])
    failure = find_bijectivity_failure(arrays[0], grid)
    if failure is not None and failure.kind == "out_of_range":
        raise RemapRejected("bijectivity", failure.message)
    coords = arrays[0]
    return np.ravel_multi_index(tuple(coords.T), grid).astype(np.int64) if len(grid) > 1 else coords[:, 0].copy()
