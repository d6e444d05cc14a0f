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
