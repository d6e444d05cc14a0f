"""`swizzleperf apply RUN|NAME --to MODULE`: the remap a run found (or a library entry) in the original module.

The run's kernel file, when it was captured, has its launches beside it: they name the kernel, the
helpers through which it reads its program id, and the command that launched it, which is run
again against the patched module. The module is written only with `--write`, and put back as it
was when that command then fails.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from swizzleperf.errors import CaptureError, RunError
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.loop.reverify import run_kernel
from swizzleperf.loop.rundir import RunDir, find_run
from swizzleperf.remaps.library import Library, LibraryEntry
from swizzleperf.workflows.export import entry_from_run
from swizzleperf.workflows.launch_capture import select, session
from swizzleperf.workflows.launch_capture.write_back import Patch, patch_module


@dataclass
class Source:
    """The remap to write back, what it is, and what the capture recorded about its kernel."""

    entry: LibraryEntry
    provenance: str
    kernel: str | None = None
    command: list[str] | None = None
    cwd: Path | None = None
    pid_helpers: frozenset[str] = frozenset()
    captured_returncode: int = 0  # how the command exited when it was captured
    order: list[str] | None = None  # where the kernel file's 2D hook results go: `pid_m, pid_n = swizzle(...)`


def _from_run(path: Path) -> Source:
    run = RunDir.open(path)
    kernel = run_kernel(run)
    kernel_file = kernel.path
    entry = entry_from_run(run, "remap_pid", kernel)
    what = (f"{entry.family}: found by swizzleperf run {run.record.run_id}, L2 read hit {entry.hit_pct:.2f}% "
            f"({entry.numbers_from}) vs {entry.baseline_hit_pct:.2f}% for the kernel's own order on {entry.hardware}")
    launches = kernel_file.with_suffix(".launches.json")
    if not launches.exists():
        return Source(entry=entry, provenance=what, kernel=run.record.kernel.name)
    found = select.read_records(launches)
    first = found.records[0]
    helpers = frozenset(f.name for f in first.closure.functions[:-1] if "program_id" in f.source)
    return Source(entry=entry, provenance=what, kernel=first.kernel.name, command=found.command, cwd=found.cwd,
                  pid_helpers=helpers, captured_returncode=found.returncode, order=_hook_targets(kernel_file))


def _hook_targets(kernel_file: Path) -> list[str] | None:
    """The names the kernel file assigns its hook's results to, in order (None where it assigns one or none)."""
    kernel = load_kernel(kernel_file)
    for node in ast.walk(ast.parse(kernel.source)):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and isinstance(node.targets[0], ast.Tuple) \
                and getattr(node.value.func, "id", None) == kernel.hook.name:
            return [e.id for e in node.targets[0].elts if isinstance(e, ast.Name)]
    return None


def resolve(ref: str, runs_dir: Path, library: Path | None) -> Source:
    """A run (path, id, `latest`) or, failing that, a library entry of that name."""
    try:
        path = find_run(ref, runs_dir)
    except RunError:
        path = None
    if path is not None:
        return _from_run(path)
    entry = Library(library).get(ref)
    what = (f"{entry.family}: swizzleperf library entry {entry.name} (run {entry.run_id}, L2 read hit "
            f"{entry.hit_pct:.2f}% ({entry.numbers_from}) vs {entry.baseline_hit_pct:.2f}% on {entry.hardware})")
    return Source(entry=entry, provenance=what, kernel=entry.kernel)


def prepare(source: Source, module: Path, kernel: str | None) -> Patch:
    name = kernel or source.kernel
    if name is None:
        raise CaptureError("which kernel of the module? pass --kernel NAME")
    return patch_module(module, name, source.entry, source.pid_helpers, source.order)


def rerun(source: Source, settings: session.CaptureSettings, folder: Path, on_progress=None) -> session.Captured:
    """The captured command, run again as it was (its directory, the stand-ins where there is no GPU);
    its output goes to `folder`."""
    if source.command is None:
        raise CaptureError("no captured command to re-run")
    return session.run_command(source.command, folder, settings, on_progress, cwd=source.cwd)
