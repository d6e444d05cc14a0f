"""`swizzleperf sweep attention`: the four attention mappings (block-first or head-first, naive or swizzled) over a grid of shapes.

For each shape (batch, heads, K/V heads, sequence length) the simulator predicts the L2 hit
rate of naive block-first (the kernel's identity), naive head-first, swizzled block-first and
swizzled head-first, the swizzled two with one cluster per KV group (group = heads / K/V heads),
beside the shape's ceiling; for a kernel with a loop-order hook (kernels/attention_persistent.py)
each again with the sawtooth K/V order. All numbers are predictions for the chosen hardware preset.

The kernel's SIZES are fixed in its file, and trace capture reloads the kernel from its path in
a child process, so a size that only existed in a `KernelFile` in this process would never reach
the capture. Each shape is therefore a copy of the kernel file with one size appended
(`SIZES["b1_h32_kv8_s4096"] = {...}`); the kernel file itself is never touched, and the copy's
text depends only on the shape, so its trace is cached across sweeps. Parameters other than the
four swept ones (head dim, causal, dtype) come from the kernel's default size, or from the size
named by `--like` (e.g. `--like mha128_16k`: non-causal bf16, to scale a GPU-only size down).

Large shapes have huge traces: the line accesses of each shape are computed from the FA2 loop
structure before anything is captured (exact for kernels/attention.py, checked against captured
traces in tests), and shapes above the cap are skipped and reported.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from swizzleperf.errors import ContractError
from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import KernelFile, load_kernel
from swizzleperf.loop.executors import Executor, InProcess
from swizzleperf.loop.pipeline import worker_kernel
from swizzleperf.remaps.families import FamilyInstance

DEFAULT_ACCESS_CAP = 60_000_000
_SHAPE_KEYS = ("batch", "heads", "kv_heads", "seq", "head_dim", "causal", "bf16")
_ELEMENT_BYTES = 2  # fp16 and bf16, the kernel's only input dtypes


# --- the four mappings ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Mapping:
    """One of the four attention mappings, as a remap family (and a loop order, where it has one)."""

    name: str
    family: str
    grouped: bool  # takes the cluster size: heads per KV group
    loop_order: str | None = None

    def instance(self, group: int) -> FamilyInstance:
        return FamilyInstance(self.family, (("group", group),) if self.grouped else (), self.loop_order)


MAPPINGS: tuple[Mapping, ...] = (
    Mapping("naive block-first", "identity", grouped=False),
    Mapping("naive head-first", "head_first", grouped=False),
    Mapping("swizzled block-first", "swizzled_block_first", grouped=True),
    Mapping("swizzled head-first", "swizzled_head_first", grouped=True),
)


def mappings_for(kernel: KernelFile) -> tuple[Mapping, ...]:
    """The four mappings, and with a loop-order hook each of them with the sawtooth K/V order too."""
    if kernel.loop_order is None:
        return MAPPINGS
    return MAPPINGS + tuple(Mapping(f"{m.name} + sawtooth", m.family, m.grouped, "sawtooth") for m in MAPPINGS)


# --- the grid of shapes ----------------------------------------------------------------------------

class Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    batch: int = Field(ge=1)
    heads: int = Field(ge=1)
    kv_heads: int = Field(ge=1)
    seq: int = Field(ge=1)

    @property
    def name(self) -> str:
        return f"b{self.batch}_h{self.heads}_kv{self.kv_heads}_s{self.seq}"

    @property
    def group(self) -> int:
        """Query heads per K/V head: the attention compute cluster of the swizzled mappings."""
        return self.heads // self.kv_heads

    def unfit_reason(self) -> str | None:
        if self.heads % self.kv_heads:
            return f"{self.heads} heads are not a multiple of {self.kv_heads} K/V heads"
        return None

    def problem(self, base: dict[str, int]) -> dict[str, int]:
        return {**base, "batch": self.batch, "heads": self.heads, "kv_heads": self.kv_heads, "seq": self.seq}


def _int_list(text: str, option: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"{option} takes comma-separated positive integers, e.g. 8,16,32; got {text!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"{option} takes comma-separated positive integers, e.g. 8,16,32; got {text!r}")
    return values


class SweepGrid(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    heads: tuple[int, ...]
    seq: tuple[int, ...]
    batch: tuple[int, ...] = (1,)
    kv_heads: tuple[int, ...] | None = Field(None, description="None: as many K/V heads as heads (MHA)")

    @classmethod
    def parse(cls, heads: str, seq: str, batch: str, kv_heads: str | None) -> "SweepGrid":
        """From the CLI's comma-separated lists; ValueError names the option that is malformed."""
        return cls(heads=_int_list(heads, "--heads"), seq=_int_list(seq, "--seq"), batch=_int_list(batch, "--batch"),
                   kv_heads=None if kv_heads is None else _int_list(kv_heads, "--kv-heads"))

    def kv_label(self, kv_heads: int | None) -> str:
        return "MHA (K/V heads = heads)" if kv_heads is None else f"{kv_heads} K/V heads"

    def panels(self) -> list[tuple[int, int | None]]:
        """(batch, K/V heads or None for MHA): one row of heatmaps each."""
        return list(itertools.product(self.batch, self.kv_heads or (None,)))

    def shapes(self) -> list[Shape]:
        return [Shape(batch=b, heads=h, kv_heads=h if kv is None else kv, seq=s)
                for b, kv in self.panels() for h in self.heads for s in self.seq]


# --- the problem at one shape ----------------------------------------------------------------------

def check_sweepable(kernel: KernelFile, like: str | None = None) -> None:
    """The sweep renders 3D attention families and counts FA2 line accesses: both need this shape."""
    base = kernel.size(like)
    missing = [k for k in _SHAPE_KEYS if k not in base]
    blocks = [n for n in ("BLOCK_M", "BLOCK_N") if not isinstance(getattr(kernel.module, n, None), int)]
    if kernel.hook.ndim != 3 or missing or blocks:
        problems = ([f"a 3D remap hook (q blocks, batch, heads), not {kernel.hook.render()}"]
                    if kernel.hook.ndim != 3 else [])
        problems += [f"size keys {', '.join(missing)}"] if missing else []
        problems += [f"module-level {', '.join(blocks)}"] if blocks else []
        raise ContractError(f"{kernel.path.name} cannot be swept like kernels/attention.py: it needs "
                            f"{'; '.join(problems)}")


def kernel_with_size(kernel: KernelFile, name: str, values: dict[str, int], directory: Path) -> KernelFile:
    """A copy of the kernel file that declares one more size, loaded and checked by the contract.

    The copy keeps the file name (reports say "attention") in its own folder under `directory`.
    """
    folder = directory / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / kernel.path.name
    declaration = ", ".join(f'"{k}": {int(v)}' for k, v in values.items())
    added = f"# added by `swizzleperf sweep`\nSIZES[{name!r}] = {{{declaration}}}\n"
    path.write_text(f"{kernel.source.rstrip()}\n\n\n{added}")
    return load_kernel(path)


def line_accesses(kernel: KernelFile, size: dict[str, int], line_bytes: int) -> int:
    """Line accesses of one FA2 forward launch at `size`: what its trace will hold.

    Per (batch, head) and Q block of `rows` query rows: the Q tile and the O tile, rows x D
    contiguous elements each; the K and V tiles of every BLOCK_N-key step up to the diagonal
    (causal) or the end, with keys past the end masked off. Tiles start on line boundaries
    (BLOCK_N * D * 2 bytes is a multiple of the line), so a tile of r rows is ceil(r*D*2 / line).
    """
    block_m, block_n = kernel.module.BLOCK_M, kernel.module.BLOCK_N
    seq, row_bytes = size["seq"], size["head_dim"] * _ELEMENT_BYTES

    def tile(rows: int) -> int:
        return -(-rows * row_bytes // line_bytes)

    per_unit = 0
    for start in range(0, seq, block_m):
        rows = min(block_m, seq - start)
        stop = min(start + block_m, seq) if size["causal"] else seq
        per_unit += 2 * tile(rows) + 2 * sum(tile(min(block_n, seq - k)) for k in range(0, stop, block_n))
    return per_unit * size["batch"] * size["heads"]


# --- the sweep -------------------------------------------------------------------------------------

class SweepCell(BaseModel):
    """One shape: the mappings' predicted hit rates, or why it was skipped."""

    model_config = ConfigDict(extra="forbid")
    shape: Shape
    status: Literal["profiled", "skipped"]
    reason: str | None = None
    line_accesses: int = Field(description="computed from the loop structure; equals the trace's count when profiled")
    hit_pct: dict[str, float] = Field(default_factory=dict, description="mapping name -> L2 hit rate, % (predicted)")
    families: dict[str, str] = Field(default_factory=dict, description="mapping name -> the family rendered")
    ceiling_pct: float | None = None
    seconds: float = 0.0
    sampling: str | None = Field(None, description="how the simulator sampled the L2 sets (None: every set, exactly)")

    def best_mappings(self) -> list[str]:
        """Every mapping at the top hit rate (as printed, to 0.01 points): ties are common at the ceiling."""
        if not self.hit_pct:
            return []
        top = round(max(self.hit_pct.values()), 2)
        return [name for name, hit in self.hit_pct.items() if round(hit, 2) == top]


class SweepReport(BaseModel):
    """sweep.json."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 1
    created_at: datetime
    kernel: str
    kernel_sha256: str
    hardware: HardwareSpec
    hardware_reason: str
    source: Literal["sim"] = "sim"
    base_size: str
    base_values: dict[str, int] = Field(description="the size named base_size: every parameter not swept")
    access_cap: int
    grid: SweepGrid
    mappings: list[str]
    cells: list[SweepCell]
    total_seconds: float

    @property
    def label(self) -> str:
        return f"predicted by the simulator for {self.hardware.name}"


def sweep_shape(kernel: KernelFile, shape: Shape, hw: HardwareSpec, access_cap: int, workdir: Path,
                cache_dir: Path | None = None, base: dict[str, int] | None = None) -> SweepCell:
    """Profile the mappings at one shape (other parameters from `base`, default the kernel's
    default size), or say why not."""
    from swizzleperf.profilers.sim import SimProfiler  # numba: only when a sweep runs

    t0 = time.perf_counter()
    values = shape.problem(base or kernel.size())
    accesses = line_accesses(kernel, values, hw.line_bytes)
    reason = shape.unfit_reason()
    if reason is None and accesses > access_cap:
        reason = f"{accesses / 1e6:.3g} M line accesses > the {access_cap / 1e6:g} M cap"
    if reason is not None:
        return SweepCell(shape=shape, status="skipped", reason=reason, line_accesses=accesses)
    shaped = kernel_with_size(kernel, shape.name, values, workdir)
    profiler = SimProfiler(hw, cache_dir=cache_dir)  # one per shape: its trace is freed with it
    hits, families, ceiling, sampling = {}, {}, None, None
    for mapping in mappings_for(kernel):
        instance = mapping.instance(shape.group)
        report = profiler.profile(shaped, instance.render(shaped.hook, shaped.loop_order), shape.name)
        hits[mapping.name], families[mapping.name], ceiling = report.hit_pct, instance.label, report.ceiling_pct
        accesses = report.trace_accesses
        sampling = next((note for note in report.notes if note.startswith("set sampling")), None)
    return SweepCell(shape=shape, status="profiled", line_accesses=accesses, hit_pct=hits, families=families,
                     ceiling_pct=ceiling, seconds=time.perf_counter() - t0, sampling=sampling)


def _sweep_shape_task(kernel: tuple[str, str, str], shape: Shape, hw: HardwareSpec, access_cap: int, workdir: Path,
                      cache_dir: Path | None, base: dict[str, int]) -> SweepCell:
    """sweep_shape where an executor runs it: the kernel travels as (path, sha256, text)."""
    return sweep_shape(worker_kernel(*kernel), shape, hw, access_cap, workdir, cache_dir, base)


def run_sweep(kernel_path: Path, hw: HardwareSpec, hw_reason: str, grid: SweepGrid,
              access_cap: int = DEFAULT_ACCESS_CAP, on_progress: Callable[[str, int, int], None] | None = None,
              cache_dir: Path | None = None, like: str | None = None,
              executor: Executor | None = None) -> SweepReport:
    """Every shape of the grid, smallest traces first (so a long sweep shows results early), on
    `executor` (default: in this process), one shape per call.

    like: the declared size whose other parameters (head dim, causal, dtype) every shape takes;
    default the kernel's default size. on_progress(what, shapes done, shapes in all) as it goes."""
    executor = executor or InProcess()
    t0 = time.perf_counter()
    kernel = load_kernel(kernel_path)
    check_sweepable(kernel, like)
    shapes = grid.shapes()
    say = on_progress or (lambda what, done, total: None)
    like = like or kernel.default_size
    base = kernel.size(like)
    order = sorted(shapes, key=lambda s: line_accesses(kernel, s.problem(base), hw.line_bytes))
    cells: dict[Shape, SweepCell] = {}
    with tempfile.TemporaryDirectory(prefix="swizzleperf-sweep-") as tmp:
        say(f"sweep: capture and simulate, {executor.describe()}", 0, len(shapes))
        calls = [((str(kernel.path), kernel.sha256, kernel.source), shape, hw, access_cap, Path(tmp), cache_dir, base)
                 for shape in order]
        for shape, cell in zip(order, executor.map(_sweep_shape_task, calls)):
            cells[shape] = cell
            say(f"{shape.name}: done, {executor.describe()}", len(cells), len(shapes))
    return SweepReport(
        created_at=datetime.now(timezone.utc), kernel=kernel.name, kernel_sha256=kernel.sha256, hardware=hw,
        hardware_reason=hw_reason, base_size=like, base_values=base, access_cap=access_cap,
        grid=grid,
        mappings=[m.name for m in mappings_for(kernel)], cells=[cells[s] for s in shapes],
        total_seconds=time.perf_counter() - t0)

