"""Placements recorded on a GPU: the SM each launch slot of a measured remap ran on.

`benchmarks/probe_placement.py --remaps` records them (the kernel's own remap hook wrapped to store
`%smid`, so the kernel runs unchanged). Simulating a measured remap on its recorded placement instead
of the dispatch model's splits the simulator's error in two: what goes away was the scheduler
model's, what is left is the caches' (and the timing's). The SMs matter far more than the times: a trial
replaying every program's rounds at its recorded start time, or in launch order at a constant rate, gave
the same hit rates to 0.01 points, and the model's turns on the same SMs within 0.9 (H100, 2026-11-27:
spmv, stencil2d, elementwise), while shuffling the SMs among each 64 programs that started together undid
the agreement (rank correlation: stencil2d 0.78 -> 0.41, spmv 0.89 -> -0.43). So only the SMs are kept.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from pydantic import BaseModel, ConfigDict


class RecordedPlacement(BaseModel):
    model_config = ConfigDict(extra="ignore")  # the probe's raw output also has each slot's start time

    kernel: str
    size: str
    remap: str             # the label fidelity.py gives the remap
    source: str            # the remap hook's source, exactly as launched
    smid: list[int]        # per launch slot, the SM that ran it


class PlacementRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    device: str
    num_sms: int
    kernels: list[RecordedPlacement]

    def find(self, kernel: str, size: str, remap: str) -> RecordedPlacement | None:
        """The recorded placement of the remap labelled `remap` (fidelity.py's labels), else None."""
        return next((p for p in self.kernels if (p.kernel, p.size, p.remap) == (kernel, size, remap)), None)


def load_placements(path: str | Path) -> PlacementRecord:
    """A probe_placement.py record, plain or gzipped JSON."""
    path = Path(path)
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return PlacementRecord.model_validate_json(raw)
