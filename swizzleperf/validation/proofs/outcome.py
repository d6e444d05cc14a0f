"""What one attempt at one die count found: proven, a counterexample, or unknown, and what it spent; and
Timeout, which ends an attempt whose work budget is spent."""

from __future__ import annotations

from dataclasses import dataclass

from swizzleperf.validation.proofs.verdict import Counterexample


@dataclass
class Outcome:
    """One attempt's result: proven, a counterexample, or unknown (with kind and reason)."""

    proven: bool = False
    counterexample: Counterexample | None = None
    unknown_kind: str | None = None
    reason: str | None = None
    overflow_total: int | None = None  # programs of the grid an intermediate overflows on
    proven_max_programs: int | None = None  # when proven only on a smaller domain than asked
    work: int = 0  # z3 resource units the attempt spent
    certificate: str | None = None  # the inverse certificate that proved injectivity (certificates.py), if one did
    cases: str | None = None  # the condition the hook was proven by cases on (branches.py), if it was

    @property
    def decisive(self) -> bool:
        return self.counterexample is not None or (self.proven and self.proven_max_programs is None)


class Timeout(Exception):
    """z3 could not decide `what` within the work left (or before the wall-clock backstop)."""

    def __init__(self, what: str, why: str):
        super().__init__(what)
        self.what, self.why = what, why
