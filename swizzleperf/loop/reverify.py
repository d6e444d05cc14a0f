"""A run read back from disk is re-derived before it is trusted: its kernel and its attempts.

run.json names the kernel file by path and hash, and both can be edited: the kernel is imported (its
module-level code runs) only if it is the file the user names, or the recorded path where it lies in
the current directory or beside the runs directory; either way only if its bytes still hash to the
recorded sha256, checked before the import.

attempts.jsonl is anyone's file: a line can claim any source "accepted" with any proof. An attempt
evaluated by this process is trusted as it was recorded; one read from disk becomes the best, is
rendered into best/, exported to a library or written into a user's module only after its source
passed the static check and the bijectivity check with its proof again, here, on the kernel's grids.
One that fails is kept in the run as rejected, with the reason, and the next in the ranking is tried.
The kernel's own hook, the baseline, needs no check: it is the kernel file the user named.
"""

from __future__ import annotations

from pathlib import Path

from swizzleperf.errors import RunError
from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import KernelFile, load_kernel, source_sha256
from swizzleperf.loop.history import History
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.loop.rundir import RunDir
from swizzleperf.records.attempt import Attempt
from swizzleperf.records.proposal import Proposal
from swizzleperf.untrusted import source_text

REREAD = "re-checked when read back from disk: "


def lies_beside(run: RunDir, path: Path) -> bool:
    """Whether `path` lies in the current directory or in the one holding the run's runs directory: where the
    recorded kernel is taken without being named."""
    places = (Path.cwd().resolve(), run.path.resolve().parent.parent)
    return any(place in Path(path).resolve().parents for place in places)


def run_kernel(run: RunDir, named: Path | None = None) -> KernelFile:
    """The run's kernel file, loaded only once it is shown to be the one the run was started on."""
    recorded = Path(run.record.kernel.path)
    path = Path(named or recorded).resolve()
    if named is None:
        if not lies_beside(run, path):
            raise RunError(f"run {run.record.run_id} names its kernel {recorded}, outside this directory and the one "
                           f"holding its runs; give the kernel file: swizzleperf optimize KERNEL --resume {run.path}")
    if not path.is_file():
        raise RunError(f"the run's kernel file {path} no longer exists")
    try:
        digest = source_sha256(source_text.decode(path.read_bytes()))
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(f"cannot read the run's kernel file {path}: {exc}") from None
    if digest != run.record.kernel.sha256:
        raise RunError(f"{path} changed since run {run.record.run_id} started, or is another file (the run's: "
                       f"{recorded}, sha256 {run.record.kernel.sha256[:12]}...; this one: {digest[:12]}...); start a new "
                       f"run instead of resuming (resuming would mix results of two different kernels)")
    return load_kernel(path)


def verified_best(run: RunDir, kernel: KernelFile, history: History, hw: HardwareSpec | None = None) -> Attempt | None:
    """The best attempt whose source holds up now, with (in `history`, not on disk) its static and bijectivity
    stages, and so the proof text best/ and a library entry quote, replaced by the ones just derived; each
    that does not hold up is recorded as rejected (in `history` and in attempts.jsonl) and the next is tried."""
    evaluator = None
    while (best := history.best()) is not None:
        if history.is_fresh(best) or (best.origin == "baseline" and best.source.strip() == kernel.hook_source.strip()):
            return best
        evaluator = evaluator or CandidateEvaluator(kernel, hw or run.record.hardware, None, run.record.size,
                                                    allow_unproven=run.record.allow_unproven)
        proposal = Proposal(source=best.source, family=best.family, origin=best.origin)
        again = evaluator.evaluate(proposal, best.iteration, until="bijectivity").stages
        failed = next((s for s in again if not s.ok), None)
        if failed is None:  # kept as recorded on disk; in memory its stages are the ones just derived
            derived = {s.stage for s in again}
            checked = best.model_copy(update={"stages": [*again, *(s for s in best.stages if s.stage not in derived)]})
            history.replace(best, checked)
            history.mark_fresh(checked)
            return checked
        stage = failed.model_copy(update={"detail": REREAD + failed.detail})
        history.replace(best, best.model_copy(update={"stages": [*(s for s in again if s.ok), stage], "report": None}))
        run.rewrite_attempts(history)
    return None
