"""The swizzle library: remaps worth keeping, as an importable package of @triton.jit functions.

A library is a directory (default `./swizzles`, or $SWIZZLEPERF_LIBRARY) that is also a Python
package: one module per entry holding the remap under its entry name, one JSON record per
entry (where it was found, its numbers, the grids it was proven bijective on), and an
`__init__.py` regenerated from the records so `from swizzles import NAME` works.
"""

from __future__ import annotations

import ast
import keyword
import os
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from swizzleperf.errors import LibraryError, RemapRejected
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.remaps.check import static_check
from swizzleperf.remaps.fit import adapt_to_hook
from swizzleperf.untrusted import readback, source_text
from swizzleperf.untrusted.parse import MAX_SOURCE_CHARS, echo, parse

ENTRY_SCHEMA_VERSION = 1


class LibraryEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_version: int = ENTRY_SCHEMA_VERSION
    name: str
    family: str
    params: list[str]       # the entry's own parameters: pid, grid extents..., the die-count constexpr
    ndim: int               # logical indices returned
    source: str             # the @triton.jit function, named `name`
    kernel: str
    kernel_sha256: str
    size: str
    hardware: str
    num_domains: int
    run_id: str
    iteration: int
    hit_pct: float
    baseline_hit_pct: float | None
    ceiling_pct: float | None
    numbers_from: str       # "sim" (a prediction), "ncu", "rocprofv3"
    metric: str = "all"     # what hit_pct counts: "read" lookups, or "all" (entries before the read/write split)
    proven_grids: list[list[int]]
    created_at: datetime
    proof: str | None = None  # the z3 verdict in one clause (proof_status.proof_sentence); None before the prover

    @field_validator("name")
    @classmethod
    def _an_identifier(cls, name: str) -> str:
        if not is_entry_name(name):  # it becomes a module, an import line in __init__.py and a function name
            raise ValueError(f"{name!r} is not a library name (a Python identifier not starting with _)")
        return name

    @field_validator("params")
    @classmethod
    def _identifiers(cls, params: list[str]) -> list[str]:
        if len(params) < 2 or not all(p.isidentifier() and not keyword.iskeyword(p) for p in params):
            raise ValueError("params must be the remap's parameter names: pid, grid extents, the die count")
        return params

    @model_validator(mode="after")
    def _source_is_the_remap_alone(self) -> "LibraryEntry":
        """The source becomes a module that `from <library> import NAME` runs: one function, nothing else."""
        try:
            tree = parse(self.source, MAX_SOURCE_CHARS)
            if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef) or tree.body[0].name != self.name:
                raise ValueError(f"its source must be the function {self.name} and nothing else")
            static_check(self.source, self.signature)
        except RemapRejected as exc:
            raise ValueError(f"its source {exc.reason}") from None
        return self

    @property
    def signature(self) -> HookSignature:
        return HookSignature(name=self.name, pid=self.params[0], grid_params=tuple(self.params[1:-1]),
                             constexprs=(self.params[-1],))

    def summary(self) -> str:
        label = "predicted by the simulator" if self.numbers_from == "sim" else f"measured with {self.numbers_from}"
        base = f" (baseline {self.baseline_hit_pct:.2f}%" if self.baseline_hit_pct is not None else " ("
        ceiling = f", ceiling {self.ceiling_pct:.2f}%)" if self.ceiling_pct is not None else ")"
        what = "L2 read hit" if self.metric == "read" else "L2 hit (reads and writes)"
        return (f"{self.family} from {self.kernel} (size {self.size}) on {self.hardware}: {what} {self.hit_pct:.2f}% "
                f"{label}{base}{ceiling}")


def default_library_dir() -> Path:
    return Path(os.environ.get("SWIZZLEPERF_LIBRARY", "swizzles"))


class Library:
    def __init__(self, root: Path | None = None):
        self.root = root or default_library_dir()

    def entries(self) -> list[LibraryEntry]:
        if not self.root.is_dir():
            return []
        return [self._read(path) for path in sorted(self.root.glob("*.json"))]

    def get(self, name: str) -> LibraryEntry:
        check_name(name)  # never a path: `apply ../x` stays in the library
        path = self.root / f"{name}.json"
        if not path.exists():
            known = ", ".join(e.name for e in self.entries()) or "none yet"
            raise LibraryError(f"no entry '{name}' in the library {self.root} (entries: {known}); "
                               f"add one with `swizzleperf export RUN --name {name}`")
        return self._read(path)

    def _read(self, path: Path) -> LibraryEntry:
        """An entry read back as untrusted input: one LibraryError line naming the file if it is not one."""
        try:
            entry = readback.read_model(path, LibraryEntry, "the library entry", inside=self.root)
        except readback.StoredFileError as exc:
            raise LibraryError(str(exc)) from None
        except OSError as exc:
            raise LibraryError(f"cannot read the library entry {path}: {exc.strerror}") from None
        if entry.name != path.stem:
            raise LibraryError(f"the library entry {path} is named '{entry.name}', not '{path.stem}'")
        return entry

    def add(self, entry: LibraryEntry, replace: bool = False) -> Path:
        check_name(entry.name)
        if (self.root / f"{entry.name}.json").exists() and not replace:
            raise LibraryError(f"the library already has '{entry.name}'; pick another --name or pass --force")
        self.root.mkdir(parents=True, exist_ok=True)
        module = ('"""A remap from the swizzleperf library (see the JSON record beside this file)."""\n\n'
                  "import triton\nimport triton.language as tl\n\n\n" + entry.source)
        (self.root / f"{entry.name}.py").write_text(module)
        (self.root / f"{entry.name}.json").write_text(entry.model_dump_json(indent=2) + "\n")
        self._write_init()
        return self.root / f"{entry.name}.py"

    def _write_init(self) -> None:
        lines = ['"""swizzleperf library: `from <this package> import NAME` gives a @triton.jit remap."""', ""]
        names = [e.name for e in self.entries()]
        lines += [f"from .{n} import {n}" for n in names]
        lines += ["", f"__all__ = {names!r}", ""]
        (self.root / "__init__.py").write_text("\n".join(lines))


def is_entry_name(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")


def check_name(name: str) -> None:
    if not is_entry_name(name):
        raise LibraryError(f"{echo(repr(name), 80)} cannot be a library name: use a Python identifier such as softmax_rows_mi300x")


def _function(source: str, name: str) -> ast.FunctionDef:
    fn = next((n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if fn is None:
        raise LibraryError(f"the source defines no function {name}")
    return fn


def rename_function(source: str, old: str, new: str) -> str:
    fn = _function(source, old)
    lines = source_text.lines(source)  # the lines the parser numbered (not splitlines())
    i = fn.lineno - 1
    lines[i] = lines[i].replace(f"def {old}(", f"def {new}(", 1)
    return "".join(lines)


def function_source(module_text: str, name: str) -> str:
    return source_text.function_text(module_text, _function(module_text, name))


def transplant(entry: LibraryEntry, hook: HookSignature, kernel_name: str) -> tuple[str, list[str]]:
    """The entry rewritten as the kernel's hook: its name and parameter names, where they correspond."""
    if entry.ndim != hook.ndim:
        raise LibraryError(
            f"library remap {entry.name}({', '.join(entry.params)}) returns {entry.ndim} logical "
            f"index(es), but {kernel_name}'s hook {hook.render()} needs {hook.ndim}: the signatures do not "
            f"correspond")
    renamed = rename_function(entry.source, entry.name, hook.name)
    return adapt_to_hook(renamed, hook)
