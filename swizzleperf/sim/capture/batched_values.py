"""Values in program-batched interpretation: lazily computed data, and the signals that stop a batch.

A loaded value, and all arithmetic on it, is computed only when something reads it (a pointer,
a mask, a branch): `lazy_class` builds a TensorHandle subclass whose `.data` forces the value,
and `lazy_aware` defers any builder method while one of its arguments is still unforced. Code
that knows nothing of laziness reads `.data` and gets the value, so it stays correct, only slower.

The signals derive from BaseException so that the interpreter's `except Exception` wrappers
around device-function calls pass them through untouched.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class NeedsReference(BaseException):
    """Fast capture cannot be exact for this launch; `reason` says why. Fall back to reference mode."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Expired(BaseException):
    """A lazy load dropped to bound memory was needed after all: rerun without dropping."""


class Diverged(BaseException):
    """The programs of the batch took different paths; `key` gives each program's value."""

    def __init__(self, key: np.ndarray):
        super().__init__("diverged")
        self.key = key


# --- lazy values ---------------------------------------------------------------------------


class LazyHandle:
    """Stands in for a TensorHandle whose data is computed when first read.

    A subclass of the interpreter's TensorHandle is created at install time (`lazy_class`), so
    `isinstance` checks in the interpreter still hold; any code that reads `.data` or `.dtype`
    forces the value, so paths we did not make lazy stay correct, only slower."""


def _evaluate(root) -> None:
    """Force `root` and its unforced inputs, deepest first, without recursion (loops build deep chains)."""
    stack = [root]
    while stack:
        node = stack[-1]
        if node._value is not None:
            stack.pop()
            continue
        waiting = [i for i in node._inputs if i._value is None]
        if waiting:
            stack.extend(waiting)
            continue
        value = node._compute()
        while isinstance(value, LazyHandle):
            value = value._force()
        node._value, node._compute, node._inputs = value, None, ()
        stack.pop()


def lazy_class(tensor_handle_cls):
    class _Lazy(tensor_handle_cls, LazyHandle):
        def __init__(self, compute: Callable, inputs=()):  # noqa: D401 - no dataclass init
            self.attr = {}
            self._compute = compute
            self._inputs = tuple(inputs)
            self._value = None

        @property
        def ready(self) -> bool:
            return self._value is not None

        def _force(self):
            if self._value is None:
                _evaluate(self)
            return self._value

        @property
        def data(self):
            return self._force().data

        def expire(self) -> None:
            """Forget how to compute the value (and the arrays that takes); forcing it now raises."""
            self._compute, self._inputs = _raise_expired, ()

        @property
        def dtype(self):
            return self._force().dtype

    return _Lazy


def _raise_expired():
    raise Expired()


def unforced(values) -> list:
    return [v for v in values if isinstance(v, LazyHandle) and v._value is None]


def lazy_aware(method: Callable, lazy: type) -> Callable:
    """A builder method deferred (as a `lazy` handle) while any tensor argument is unforced."""
    def wrapper(self, *args, **kwargs):
        waiting = unforced((*args, *kwargs.values()))
        if waiting:
            return lazy(lambda: method(self, *args, **kwargs), waiting)
        return method(self, *args, **kwargs)
    return wrapper


def lazy_split(method: Callable, lazy: type) -> Callable:
    """`lazy_aware` for create_split, which returns two handles."""
    def wrapper(self, val):
        if not unforced([val]):
            return method(self, val)
        return lazy(lambda: method(self, val)[0], [val]), lazy(lambda: method(self, val)[1], [val])
    return wrapper


def for_programs(a: np.ndarray, q: int) -> np.ndarray:
    """`a` with its trailing program axis broadcast to `q` programs (a shared value's axis is 1)."""
    return np.broadcast_to(a, (*a.shape[:-1], q))
