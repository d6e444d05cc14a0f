"""One program of one grid, evaluated exactly (int32 wrap-around, truncating division).

A solver's model is a claim: "this grid and these programs break the remap". Before it becomes
a counterexample it is re-evaluated here, with the concrete backend, so a verdict never rests
on the z3 encoding alone; the events logged on the way (an overflow, a negative dividend)
also tell the prover which of its encoding assumptions the model broke.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field

from swizzleperf.kernel.contract import HookSignature
from swizzleperf.validation.proofs.backends import UNDEFINED, ConcreteBackend, Violation
from swizzleperf.validation.proofs.encoding import sizes_of
from swizzleperf.validation.proofs.symexec import Executor
from swizzleperf.validation.proofs.verdict import Counterexample

_WHAT = {"div_zero": "divides by zero", "div_overflow": "divides INT_MIN by -1"}


@dataclass
class Run:
    """What one program computes, and the events met on its path."""

    grid: tuple[int, ...]
    pid: int
    logical: tuple[int, ...]
    events: list[Violation]
    sizes: dict[str, int] = field(default_factory=dict)  # a SizedHook's run-time sizes, by name

    @property
    def total(self) -> int:
        return math.prod(self.grid)

    @property
    def in_range(self) -> bool:
        return all(0 <= c < e for c, e in zip(self.logical, self.grid))

    def first(self, kinds: tuple[str, ...]) -> Violation | None:
        return next((e for e in self.events if e.kind in kinds), None)


def evaluate_program(fn: ast.FunctionDef, hook: HookSignature, constexprs: dict[str, int],
                     grid: tuple[int, ...], pid: int, sizes: tuple[int, ...] = ()) -> Run:
    """The logical index program `pid` maps to on `grid` (a SizedHook: with `sizes`), computed as
    compiled Triton would."""
    backend = ConcreteBackend()
    inputs = {hook.pid: pid, **dict(zip(hook.grid_params, grid)), **dict(zip(sizes_of(hook), sizes))}
    executor = Executor(fn, hook, backend, inputs, constexprs)
    logical = tuple(int(v) for v in executor.outputs())
    return Run(tuple(grid), pid, logical, backend.violations, dict(zip(sizes_of(hook), map(int, sizes))))


def _grid_text(grid: tuple[int, ...]) -> str:
    return f"({grid[0]},)" if len(grid) == 1 else "(" + ", ".join(map(str, grid)) + ")"


def _index_text(index: tuple[int, ...]) -> str:
    return str(index[0]) if len(index) == 1 else "(" + ", ".join(map(str, index)) + ")"


def _dies_text(constexprs: dict[str, int], sizes: dict[str, int] | None = None) -> str:
    return ", ".join(f"{k}={v}" for k, v in {**(sizes or {}), **constexprs}.items())


def undefined(run: Run, constexprs: dict[str, int]) -> Counterexample | None:
    """The program's first undefined operation (division by zero, ...), as a counterexample."""
    event = run.first(UNDEFINED)
    if event is None:
        return None
    line = event.node[0]
    return Counterexample(
        kind="undefined", grid=run.grid, constexprs=constexprs, programs=[run.pid], line=line, sizes=run.sizes,
        message=f"grid {_grid_text(run.grid)} with {_dies_text(constexprs, run.sizes)}: program {run.pid} "
                f"{_WHAT[event.kind]} ({event.detail}) at line {line}")


def poison_text(run: Run, constexprs: dict[str, int]) -> str | None:
    """Why a shift by an amount outside [0, bits) leaves the verdict unknown, if one happens.

    LLVM makes such a shift poison, which is harmless when a select discards it (remaps/evaluate
    tracks that); the prover does not track poison, so it claims neither way.
    """
    event = run.first(("shift_range",))
    if event is None:
        return None
    return (f"program {run.pid} of grid {_grid_text(run.grid)} with {_dies_text(constexprs)} shifts {event.detail} at "
            f"line {event.node[0]}, outside [0, bits): poison in LLVM, which the prover does not track")


def out_of_range(run: Run, constexprs: dict[str, int]) -> Counterexample | None:
    if run.in_range:
        return None
    return Counterexample(
        kind="out_of_range", grid=run.grid, constexprs=constexprs, programs=[run.pid], logical=run.logical,
        sizes=run.sizes,
        message=f"grid {_grid_text(run.grid)} with {_dies_text(constexprs, run.sizes)}: program {run.pid} maps to "
                f"{_index_text(run.logical)}, outside the grid")


def collision(a: Run, b: Run, constexprs: dict[str, int]) -> Counterexample | None:
    """Two distinct programs of one grid that map to one logical index, if they do."""
    if a.grid != b.grid or a.pid == b.pid or a.logical != b.logical or not a.in_range:
        return None
    return Counterexample(
        kind="collision", grid=a.grid, constexprs=constexprs, programs=sorted([a.pid, b.pid]), logical=a.logical,
        sizes=a.sizes,
        message=f"grid {_grid_text(a.grid)} with {_dies_text(constexprs, a.sizes)}: programs {min(a.pid, b.pid)} and "
                f"{max(a.pid, b.pid)} both map to {_index_text(a.logical)} (of {math.prod(a.grid):,} programs)")


def overflow_text(run: Run, constexprs: dict[str, int], source_lines: list[str]) -> str:
    """Where int32 wraps for this program, for an "unknown: overflow" verdict."""
    event = run.first(("overflow",))
    assert event is not None
    line = event.node[0]
    text = source_lines[line - 1].strip() if 0 < line <= len(source_lines) else "?"
    return (f"line {line} (`{text}`) leaves its integer type's range (the value {event.detail.lstrip('= ')} wraps) "
            f"for program {run.pid} of grid {_grid_text(run.grid)} with {_dies_text(constexprs)}")
