"""`swizzleperf export`: the best remap of a finished run, kept as a library entry.

The run directory is read back (run.json, attempts.jsonl) and the entry records where
the remap came from, its numbers and the grids it was proven bijective on.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from swizzleperf.errors import RunError
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.loop.artifacts import provenance, with_docstring
from swizzleperf.loop.reverify import run_kernel, verified_best
from swizzleperf.loop.rundir import RunDir, find_run
from swizzleperf.remaps.library import Library, LibraryEntry, check_name, function_source, rename_function


def export_run(run_ref: str, name: str, library: Path | None, runs_dir: Path,
               replace: bool = False) -> tuple[Library, LibraryEntry, Path]:
    """Store the best remap of the run `run_ref` (a path, an id or `latest`) as library entry `name`."""
    run = RunDir.open(find_run(run_ref, runs_dir))
    lib = Library(library)
    entry = entry_from_run(run, name, run_kernel(run))
    return lib, entry, lib.add(entry, replace=replace)


def entry_from_run(run: RunDir, name: str, kernel: KernelFile) -> LibraryEntry:
    """The best attempt of a finished run, as a library entry named `name`: its source checked again first
    (loop.reverify), as the run directory is read back from disk."""
    check_name(name)
    best = verified_best(run, kernel, run.load_history())
    if best is None or best.report is None:
        raise RunError(f"run {run.record.run_id} has no accepted attempt to export")
    if best.origin == "baseline":
        raise RunError(f"run {run.record.run_id}: the kernel's own remap is still the best; nothing to export")
    bij = next((s for s in best.stages if s.stage == "bijectivity"), None)
    grids = [list(g) for g in (bij.data or {}).get("grids", [])] if bij else []
    proof = (bij.data or {}).get("proof_text") if bij else None
    rec, kernel_hook = run.record, kernel.hook
    source = function_source(with_docstring(best.source, provenance(run, best)), kernel_hook.name)
    return LibraryEntry(
        name=name, family=best.family, params=list(kernel_hook.params), ndim=kernel_hook.ndim,
        source=rename_function(source, kernel_hook.name, name), kernel=rec.kernel.name,
        kernel_sha256=rec.kernel.sha256, size=rec.size, hardware=rec.hardware.name,
        num_domains=rec.hardware.num_domains, run_id=rec.run_id, iteration=best.iteration,
        hit_pct=best.report.hit_pct, metric=best.report.metric, baseline_hit_pct=rec.baseline_hit_pct,
        ceiling_pct=rec.ceiling_pct,
        numbers_from=best.report.source, proven_grids=grids, proof=proof, created_at=datetime.now(timezone.utc))
