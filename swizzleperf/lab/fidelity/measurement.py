"""What a fidelity run writes: the counters measured for each (kernel, remap), as recorded.

Raw counter values are kept under their ncu metric names (base units: sectors, bytes, ns), so a
later model can be compared against the same measurement without re-running the GPU.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class MeasuredRemap(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str          # "identity", "best (tests/fixtures/best_remaps)", or a family instance
    source: str         # the remap hook's source, exactly as launched
    metrics: dict[str, float]


class MeasuredKernel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kernel: str
    kernel_sha256: str
    size: str
    num_xcds: int                            # value given to the hook's die-count constexpr
    remaps: list[MeasuredRemap]
    compiled: dict[str, int] = {}            # Triton's metadata of the identity build: num_warps, shared, n_regs
    error: str | None = None                 # why this kernel has no measurement


class Measurement(BaseModel):
    """One fidelity run on one GPU."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    device: str
    tool: str                                # e.g. "ncu 2025.3.1"
    cache_control: str                       # "all": every replay starts from a flushed L2
    versions: dict[str, str]
    dropped_metrics: list[str] = []          # requested but unknown to this GPU/ncu
    kernels: list[MeasuredKernel]


def merged(parts: list[Measurement], order: tuple[str, ...] = (), keep: tuple[str, ...] = ()) -> Measurement:
    """One measurement from the parts of one run split over GPUs (each `measure --kernels` on its own): the
    same device, ncu and cache control, each kernel once, in `order` (others after, as found); `keep`: only
    those kernels. Raises ValueError for parts that are not one run's."""
    setups = {(m.device, m.tool, m.cache_control) for m in parts}
    if len(setups) != 1:
        raise ValueError(f"the parts come from different set-ups, not one run: {sorted(setups)}")
    kernels = [k for m in parts for k in m.kernels if not keep or k.kernel in keep]
    names = [k.kernel for k in kernels]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"a kernel is in more than one part: {', '.join(twice)}")
    rank = {name: i for i, name in enumerate(order)}
    kernels.sort(key=lambda k: rank.get(k.kernel, len(rank)))
    first = min(parts, key=lambda m: m.versions.get("date", ""))
    return first.model_copy(update={"kernels": kernels,
                                    "dropped_metrics": sorted({d for m in parts for d in m.dropped_metrics})})
