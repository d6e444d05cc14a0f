"""A recorded launch read back from JSON: checked field by field before anything is built from it.

A record is written by `recorder.py` inside the user's process, but read back it is a file like
any other: names become Python identifiers in a kernel file, source units are copied into it,
so each is checked for what it claims to be (an identifier, an import statement, one assignment
of a literal, one function definition of that name) and anything else is refused in one line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from swizzleperf.errors import CaptureError
from swizzleperf.untrusted import readback

DTYPES = ("float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
          "float8_e5m2fnuz", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")
_IMPORT = re.compile(r"(from [A-Za-z_][\w.]* )?import [A-Za-z_][\w.]*( as [A-Za-z_]\w*)?")
_FROM = re.compile(r"from [A-Za-z_][\w.]* import [A-Za-z_]\w*")
_LIMIT = 1 << 40


def _identifier(name: str) -> str:
    if not name.isidentifier():
        raise ValueError(f"{name!r} is not a Python identifier")
    return name


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TensorParam(_Strict):
    name: str
    constexpr: bool = False
    kind: Literal["tensor"]
    dtype: Literal[DTYPES]
    shape: list[int] = Field(max_length=8)
    strides: list[int] = Field(max_length=8)
    offset: int = Field(ge=0, le=_LIMIT)
    extent: int = Field(ge=0, le=_LIMIT)
    device: str
    written: bool = False
    in_place: bool = False
    zeros: bool = False
    values: list[int] | None = None
    range: list[int] | None = Field(default=None, min_length=2, max_length=2)
    sorted: bool | None = None

    _name = field_validator("name")(_identifier)

    @model_validator(mode="after")
    def _layout(self):
        if len(self.shape) != len(self.strides) or any(n < 0 or n > _LIMIT for n in self.shape):
            raise ValueError(f"{self.name}: shape {self.shape} and strides {self.strides} do not describe a tensor")
        if self.values is not None and len(self.values) != self.extent - self.offset:
            raise ValueError(f"{self.name}: {len(self.values)} values for a storage span of "
                             f"{self.extent - self.offset} elements")
        return self


class ValueParam(_Strict):
    name: str
    constexpr: bool = False
    kind: Literal["int", "float", "bool", "str", "none", "triton_dtype", "torch_dtype", "object"]
    value: Any = None
    type: str | None = None  # for an object: its class

    _name = field_validator("name")(_identifier)


Param = Annotated[Union[TensorParam, ValueParam], Field(discriminator="kind")]


class KernelInfo(_Strict):
    name: str
    module: str
    qualname: str
    file: str
    line: int = Field(ge=0)

    _name = field_validator("name")(_identifier)


class Unit(_Strict):
    kind: Literal["import", "constant", "unresolved"]
    name: str
    text: str
    module: str | None = None
    why: str | None = None

    _name = field_validator("name")(_identifier)

    @model_validator(mode="after")
    def _shape(self):
        if self.kind == "import" and not _IMPORT.fullmatch(self.text):
            raise ValueError(f"import unit {self.name!r} is not one import statement: {self.text[:80]!r}")
        if self.kind == "unresolved" and not _FROM.fullmatch(self.text):
            raise ValueError(f"unresolved unit {self.name!r} is not one from-import: {self.text[:80]!r}")
        if self.kind == "constant":
            _one_constant(self.name, self.text)
        return self


def _one_constant(name: str, text: str) -> None:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        raise ValueError(f"constant {name!r} does not parse") from None
    ok = (len(tree.body) == 1 and isinstance(tree.body[0], ast.Assign)
          and [ast.unparse(t) for t in tree.body[0].targets] == [name] and _literal(tree.body[0].value))
    if not ok:
        raise ValueError(f"constant {name!r} is not one assignment of a literal: {text[:80]!r}")


def _literal(node: ast.expr) -> bool:
    """What closure.py writes for a constant: a literal, -literal, float("inf"), tl.<dtype>, tl.constexpr(literal)."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and node.value.id == "tl"
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        return ast.unparse(node.func) in ("float", "tl.constexpr") and _literal(node.args[0])
    return False


class Function(_Strict):
    name: str
    module: str
    file: str
    line: int = Field(ge=0)
    source: str = Field(max_length=200_000)

    _name = field_validator("name")(_identifier)

    @model_validator(mode="after")
    def _one_def(self):
        try:
            tree = ast.parse(self.source)
        except SyntaxError as exc:
            raise ValueError(f"function {self.name!r} does not parse: line {exc.lineno}: {exc.msg}") from None
        if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef) or tree.body[0].name != self.name \
                or tree.body[0].decorator_list:
            raise ValueError(f"function {self.name!r}: its source is not one undecorated def {self.name}(...)")
        return self


class Closure(_Strict):
    imports: list[Unit]
    constants: list[Unit]
    functions: list[Function] = Field(min_length=1)
    unresolved: list[Unit]
    problems: list[str]


class Chosen(_Strict):
    by: str
    how: str
    config: str | None = None
    values: dict[str, Any] = Field(default_factory=dict)


class Replay(_Strict):
    """What the kernel wrote when run on the kernel file's own inputs for `seed` (sha256 prefixes of its outputs)."""

    seed: int
    outputs: dict[str, str]


class LaunchRecord(_Strict):
    """One launch: the kernel, its grid, every argument, the options, and who chose the constexprs."""

    format: Literal[1]
    seq: int = Field(ge=0)
    launcher: str
    grid: list[int] = Field(min_length=3, max_length=3)
    kernel: KernelInfo
    params: list[Param]
    options: dict[str, int | None]
    chosen: list[Chosen]
    device: str
    closure: Closure
    cwd: str
    argv: list[str]
    replay: Replay | None = None

    @model_validator(mode="after")
    def _consistent(self):
        if any(g < 1 or g > 2**31 - 1 for g in self.grid):
            raise ValueError(f"grid {self.grid} is not a launch grid")
        if self.closure.functions[-1].name != self.kernel.name:
            raise ValueError(f"the closure ends with {self.closure.functions[-1].name}, not the kernel "
                             f"{self.kernel.name}")
        if len({p.name for p in self.params}) != len(self.params):
            raise ValueError("two parameters have the same name")
        return self

    @property
    def programs(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    def tensors(self) -> list[TensorParam]:
        return [p for p in self.params if isinstance(p, TensorParam)]


def read(path: Path) -> LaunchRecord:
    """A launch record from `path`, or CaptureError with one line saying what is wrong."""
    try:
        data = readback.read_json(path, "the launch record", inside=path.resolve().parent)
    except OSError as exc:
        raise CaptureError(f"cannot read the launch record {path}: {exc.strerror}") from None
    except readback.StoredFileError as exc:
        raise CaptureError(str(exc)) from None
    return parse(data, str(path))


def parse(data, what: str) -> LaunchRecord:
    """A launch record from parsed JSON, or CaptureError naming `what` and the first bad field."""
    try:
        return LaunchRecord.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"] if isinstance(x, int) or str(x).isidentifier())
        raise CaptureError(f"{what} is not a launch record swizzleperf can use: {where}: {err['msg']}") from None
