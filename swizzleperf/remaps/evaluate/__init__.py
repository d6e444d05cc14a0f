"""Evaluate a checked remap hook for every program of a grid at once, with Triton's semantics.

The hook's syntax tree is interpreted (never exec'd) over numpy arrays: one lane per launch id.
Statements run on the lanes still active: a run-time `if` splits them, its results merge back
lane by lane, and `return` retires the lanes that reach it. Values follow compiled Triton:

* Compile-time values (literals, constexpr parameters, `tl.static_range` indices, and
  expressions of only those) are Python ints with Python semantics: `(-7) // 2 == -4`.
* Run-time values (program ids, grid extents, `range` indices, anything mixed with them) are
  int32/int64/uint32/uint64/bool with wraparound, C division and remainder (`-7 // 2 == -3`,
  `-7 % 2 == -1`), arithmetic `>>` on signed values, and Triton's promotion rules: a literal
  takes the run-time operand's type (and must fit it); mixing widths promotes like C.
  Verified against TRITON_INTERPRET=1 in tests/remaps/test_remap.py.
* Undefined behaviour is an error, not a value: division by zero or INT_MIN // -1 on a lane
  that evaluates it, and a value shifted by a negative or too-large amount that reaches a
  branch, a division or the result (a `tl.where` may discard it, as LLVM allows).
* Where the Triton interpreter and the compiler disagree, the compiler wins (checked against
  Triton's own front end in the tests): an assignment stores a run-time value even when the
  right side is a constant (`x = -7; x // 2 == -3`, where the interpreter says -4); `range`
  indices are run-time int32; names defined in one branch of a run-time `if`, inside a `range`
  loop, or a `range` index are gone afterwards; and what the compiler refuses is rejected
  (rebinding a constexpr parameter under a run-time `if` or in a `range` loop, branches or
  returns of different types, `and`/`not` on integers, `//` across signedness, constants that
  do not fit the other operand's type).

Errors raise RemapRejected("evaluation", "line L: ...").
"""

from swizzleperf.remaps.evaluate.evaluator import evaluate, evaluate_checked, evaluate_grids_child
from swizzleperf.remaps.evaluate.values import (
    CASTS,
    INT1,
    INT32,
    INT64,
    UINT32,
    UINT64,
    Const,
    IntType,
    Tensor,
    Value,
    integer_promote,
    scalar_type,
)

__all__ = ["CASTS", "INT1", "INT32", "INT64", "UINT32", "UINT64", "Const", "IntType", "Tensor", "Value",
           "evaluate", "evaluate_checked", "evaluate_grids_child", "integer_promote", "scalar_type"]
