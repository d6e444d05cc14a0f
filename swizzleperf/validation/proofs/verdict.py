"""The prover's answer, as a pydantic model: it is written beside the attempt it describes.

Three outcomes. "proven": for every grid in the domain (each extent >= 1, at most
`max_programs` programs in all) and every listed die count, the hook maps the launch ids
[0, total) one-to-one into the logical grid. "counterexample": a grid, a die count and the
programs that show it is not (checked by evaluating the hook on them with Triton's int32
semantics). "unknown": the solver ran out of time ("timeout"), the hook uses something the prover
does not translate ("unsupported") or Triton would not compile ("invalid"), or an int32
intermediate can wrap on some grid and neither encoding settled what that does ("overflow",
with the largest domain that was proven, if any); `reason` says which.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

INT32_MAX = 2 ** 31 - 1

UnknownKind = Literal["timeout", "unsupported", "invalid", "overflow", "error"]


class Counterexample(BaseModel):
    """A grid and die count on which the remap is not a bijection, with the programs that show it."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["collision", "out_of_range", "undefined"] = Field(
        description="collision: two programs map to one logical index; out_of_range: a program maps outside the "
                    "grid; undefined: a program divides by zero, shifts out of range or overflows a division")
    grid: tuple[int, ...]
    constexprs: dict[str, int] = Field(description="the die count the hook was given, by parameter name")
    programs: list[int] = Field(description="launch ids: two for a collision, one otherwise")
    logical: tuple[int, ...] | None = Field(None, description="where the programs map (None when undefined)")
    line: int | None = Field(None, description="the hook's line with the undefined operation")
    sizes: dict[str, int] = Field(default_factory=dict, description="the run-time sizes of a hook that reads "
                                                                    "some beside its grid (a loop order's local tile)")
    message: str


class ProofVerdict(BaseModel):
    """Whether a remap hook is a bijection for every grid size, by an SMT proof (z3)."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 1
    status: Literal["proven", "counterexample", "unknown"]
    hook: str = Field(description="the hook's signature")
    die_counts: list[int] = Field(description="values of the die-count constexpr the verdict covers")
    proven_die_counts: list[int] = Field(default_factory=list, description="die counts proven before the verdict")
    max_programs: int = Field(INT32_MAX, description="the domain: grids with at most this many programs")
    proven_max_programs: int | None = Field(
        None, description="unknown because an intermediate can overflow int32: the largest domain (at most this "
                          "many programs) on which the hook was proven for the die counts tried")
    semantics: str = Field("compiled Triton's integers: int32 program ids and extents, // and % truncating toward "
                           "zero, wrap-around (exact 32-bit vectors, or integers once no intermediate can overflow); "
                           "constexprs folded with Python's rules; bounded loops unrolled")
    counterexample: Counterexample | None = None
    unknown_kind: UnknownKind | None = None
    reason: str | None = Field(None, description="why the verdict is unknown")
    method: str | None = Field(None, description="how a hook proven in parts was cut, or which inverse certificate "
                                                 "proved it one-to-one (None: proven whole, without one)")
    time_limit_s: float
    seconds: float

    @property
    def proven(self) -> bool:
        return self.status == "proven"

    @property
    def message(self) -> str:
        """One sentence for the CLI, reports and prompts."""
        dies = ", ".join(map(str, self.die_counts))
        if self.status == "proven":
            how = f", {self.method}," if self.method else ""
            return (f"proven bijective for every grid of up to {self.max_programs:,} programs "
                    f"(die counts {dies}){how} in {self.seconds:.2f} s")
        if self.status == "counterexample" and self.counterexample is None:
            return "not a bijection"
        if self.status == "counterexample":
            return f"not a bijection: {self.counterexample.message}"
        smaller = (f"; proven for grids of up to {self.proven_max_programs:,} programs"
                   if self.proven_max_programs else "")
        return f"bijectivity not proven ({self.unknown_kind}): {self.reason}{smaller}"
