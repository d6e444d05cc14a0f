"""`swizzleperf optimize` without a terminal: assemble the hardware, profiler, proposer and run
directory from a request, drive the loop, and write the best remap back where asked.

Console-free: what a person sees is the CLI's (cli/optimize_command.py), which renders what these
return and what the loop's Observer reports; bench runs whole optimizations through `run_quietly`.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from swizzleperf.errors import ContractError
from swizzleperf.hardware.select import resolve as resolve_hardware
from swizzleperf.kernel.contract import KernelFile, find_kernel, load_kernel
from swizzleperf.loop.driver import DEFAULT_BATCH, LoopSettings, Observer, finish, run_loop, start_run
from swizzleperf.loop.executors import Executor, make_executor
from swizzleperf.loop.history import History, within_noise
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.loop.reverify import lies_beside, run_kernel, verified_best
from swizzleperf.loop.rundir import RunDir, find_run
from swizzleperf.profilers.base import Profiler
from swizzleperf.profilers.select import select_profiler
from swizzleperf.proposers.base import Proposer
from swizzleperf.proposers.registry import PROPOSERS, make_proposer, resolve_proposer

DEFAULT_LLM_TIMEOUT_S = 180.0


@dataclass
class OptimizeRequest:
    """What `swizzleperf optimize` is asked; the defaults are the command line's."""

    kernel_path: str | Path | None  # a file, or a name under kernels/ (None with resume)
    hardware: str | None = None  # a preset, a spec file, or None: the local GPU, else the default preset
    profiler: str = "auto"
    proposer: str | None = None  # None: search, or llm when a model is given
    iterations: int = 24
    patience: int = 10
    size: str | None = None  # None: the kernel's DEFAULT_SIZE
    seed: int = 0
    model: str | None = None
    api_base: str | None = None
    llm_mode: str = "aware"
    llm_timeout: float | None = None  # None: 180 s for a new run, the recorded one for a resumed run
    llm_retries: int = 3
    context_tokens: int | None = None  # the model's context window, where its server does not say it
    max_tokens: int | None = None  # every model call's answer budget (default: per call)
    library: Path | None = None  # a library to warm-start from
    write: bool = False
    resume: str | None = None
    runs_dir: Path = Path("runs")
    stop_at_ceiling: bool = True
    batch: int = DEFAULT_BATCH  # proposals per snapshot of the history (a resumed run keeps its own)
    workers: int | None = 1  # None: one per core (default_workers()); 1: in this process
    ray: str | None = None  # 'auto' or a cluster address: evaluate on Ray instead
    allow_unproven: bool = False  # accept remaps whose proof does not cover the declared grids (marked so)


@dataclass
class OpenedRun:
    """A run ready for the loop, and why each part was chosen (for the person who asked)."""

    run: RunDir
    kernel: KernelFile
    profiler: Profiler
    proposer: Proposer
    resumed: bool
    hardware_reason: str = ""
    profiler_reason: str = ""


def open_run(request: OptimizeRequest, on_capture: Callable[[int, int], None] | None = None,
             say: Callable[[str], None] = lambda line: None) -> OpenedRun:
    """The run `request` names: a new one (its run.json written), or the one it resumes (marked running).
    `say` hears, as soon as it is known, where the request was read other than literally (a --model
    without --proposer), before anything that might fail on it."""
    return _resumed_run(request, on_capture) if request.resume else _new_run(request, on_capture, say)


def _resumed_run(request: OptimizeRequest, on_capture) -> OpenedRun:
    run = RunDir.open(find_run(request.resume, request.runs_dir))
    kernel = run_kernel(run, find_kernel(request.kernel_path) if request.kernel_path else None)
    rec = run.record
    profiler, _ = select_profiler(rec.profiler, rec.hardware, progress=on_capture)
    if rec.proposer in PROPOSERS and PROPOSERS[rec.proposer].asks_model:  # what a model's failure asks to change
        given = (("timeout_s", request.llm_timeout), ("context_tokens", request.context_tokens),
                 ("max_tokens", request.max_tokens))
        rec.proposer_options = {**rec.proposer_options, **{k: v for k, v in given if v is not None}}
    proposer = make_proposer(rec.proposer, rec.seed, rec.proposer_options)
    rec.status, rec.status_detail = "running", f"resumed with {len(run.load_history())} attempts on disk"
    run.save()
    return OpenedRun(run, kernel, profiler, proposer, resumed=True)


def _new_run(request: OptimizeRequest, on_capture, say: Callable[[str], None]) -> OpenedRun:
    if request.kernel_path is None:
        raise ContractError("give a kernel file (e.g. kernels/softmax.py) or --resume RUN")
    kernel = load_kernel(find_kernel(request.kernel_path))
    size = request.size or kernel.default_size
    kernel.size(size)
    spec, hw_why = resolve_hardware(request.hardware)
    profiler, prof_why = select_profiler(request.profiler, spec, progress=on_capture)
    proposer_name, note = resolve_proposer(request.proposer, request.model)
    if note:
        say(note)
    asks_model = proposer_name in PROPOSERS and PROPOSERS[proposer_name].asks_model
    options = {} if not asks_model else {
        "model": request.model, "api_base": request.api_base, "mode": request.llm_mode,
        "timeout_s": request.llm_timeout or DEFAULT_LLM_TIMEOUT_S, "retries": request.llm_retries,
        "context_tokens": request.context_tokens, "max_tokens": request.max_tokens}
    if request.library is not None:
        options["library"] = str(request.library.resolve())
    proposer = make_proposer(proposer_name, request.seed, options)
    run = start_run(request.runs_dir, kernel, size, spec, hw_why, profiler, prof_why, proposer, options,
                    LoopSettings(iterations=request.iterations, patience=request.patience, seed=request.seed,
                                 stop_at_ceiling=request.stop_at_ceiling, batch=request.batch,
                                 allow_unproven=request.allow_unproven))
    return OpenedRun(run, kernel, profiler, proposer, resumed=False, hardware_reason=hw_why,
                     profiler_reason=prof_why)


def drive(opened: OpenedRun, executor: Executor, history: History, observer: Observer,
          should_stop: Callable[[], bool] = lambda: False) -> None:
    """The loop until it ends, then the run's files; run.json records how it ended: stopped (should_stop
    turned true: "interrupted"), failed (the exception, re-raised), or finished. A KeyboardInterrupt
    passes through untouched: the caller says what it means."""
    run, kernel = opened.run, opened.kernel
    rec = run.record
    evaluator = CandidateEvaluator(kernel, rec.hardware, opened.profiler, rec.size, allow_unproven=rec.allow_unproven)
    if opened.resumed:
        verified_best(run, kernel, history)  # the stop rules read the best: a forged record must not set it
    try:
        run_loop(run, kernel, opened.proposer, evaluator, history, observer, should_stop=should_stop,
                 executor=executor)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        rec.status, rec.status_detail = "failed", f"{type(exc).__name__}: {exc}"
        run.save()
        raise
    if should_stop():
        rec.status = "interrupted"  # the detail says "stopped by the user"
        run.save()
    finish(run, kernel, history, opened.profiler)


def run_quietly(request: OptimizeRequest) -> RunDir:
    """A whole optimization with nobody watching (bench, benchmarks): no progress, no Ctrl-C handling."""
    executor = make_executor(request.workers, request.ray)
    try:
        opened = open_run(request)
        drive(opened, executor, opened.run.load_history(), Observer())
    finally:
        executor.close()
    if request.write:
        write_best(opened.run, opened.kernel)
    return opened.run


def write_best(run: RunDir, kernel: KernelFile) -> str:
    """--write: the best remap into the user's kernel file; the sentence that says what happened."""
    best = run.best_dir / kernel.path.name
    history = run.load_history()
    chosen = history.best()
    if chosen is None or chosen.origin == "baseline" or not best.exists():
        return "--write: the original remap is still the best; the kernel file is unchanged"
    if within_noise(chosen, history.baseline()) is not None:
        return "--write: the best remap's gain is within the profiler's noise; the kernel file is unchanged"
    kernel.path.write_text(best.read_text())
    return f"--write: wrote the best remap into {kernel.path}"


def resume_command(run: RunDir) -> str:
    """The exact command that continues `run`, for a shell in this directory (naming the kernel where
    run_kernel would not take the recorded path on its own)."""
    kernel = Path(run.record.kernel.path)
    named = "" if lies_beside(run, kernel) else f"{shlex.quote(str(kernel))} "
    return f"swizzleperf optimize {named}--resume {shlex.quote(str(run.path))}"
