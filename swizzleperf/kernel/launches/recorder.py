"""Triton's launch paths wrapped so that each distinct launch is recorded, and otherwise runs as before.

Every launch ends in one of three places: `JITFunction.run` (compiled), `InterpretedFunction.run`
(TRITON_INTERPRET=1), or a compiled kernel's `kernel[grid](...)` after `warmup`. The autotuner
and heuristics wrappers call into the first two with their chosen values as keyword arguments,
so the innermost call sees the final constexprs; theirs are wrapped only to say who chose them
(and, on the CPU, to run one config instead of benchmarking all of them in the interpreter).
Around a recorded launch: the tensors are copied, the launch runs, the ones whose bits changed
are its outputs, and one probe launch on copies with those outputs poisoned tells whether it
reads them first (in place). Launches inside the autotuner's benchmarking are not recorded.
"""

from __future__ import annotations

import inspect
import itertools
import os
import sys
import threading

from swizzleperf.kernel.launches import closure, describe, journal, rebuild

_local = threading.local()
_seq = itertools.count()
_seen: set = set()
_per_kernel: dict[str, int] = {}
_closures: dict[int, dict] = {}


def _context() -> list[dict]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def _quiet() -> bool:
    return any(c.get("quiet") for c in _context())


class _Within:
    def __init__(self, **entry):
        self.entry = entry

    def __enter__(self):
        _context().append(self.entry)

    def __exit__(self, *exc):
        _context().pop()


def _bind(python_fn, args: tuple, kwargs: dict) -> tuple[dict, dict]:
    """Kernel parameter -> value (defaults applied), and the launch options (num_warps, ...)."""
    sig = inspect.signature(python_fn)
    bound = sig.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in sig.parameters})
    bound.apply_defaults()
    return dict(bound.arguments), {k: v for k, v in kwargs.items() if k not in sig.parameters}


def _grid(grid, named: dict) -> list[int]:
    g = grid(named) if callable(grid) else grid
    g = [int(x) for x in (g if isinstance(g, (tuple, list)) else (g,))]
    return (g + [1, 1])[:3]


def _constexprs(python_fn) -> set[str]:
    return {n for n, p in inspect.signature(python_fn).parameters.items()
            if p.annotation is not inspect.Parameter.empty and "constexpr" in str(p.annotation)}


def _signature(python_fn, grid: list[int], named: dict) -> tuple:
    parts = []
    for name, v in named.items():
        parts.append((name, tuple(v.shape), str(v.dtype), tuple(v.stride())) if describe.is_tensor(v)
                     else (name, repr(v)[:100]))
    return (id(python_fn), tuple(grid), tuple(parts))


def _wanted(python_fn, settings: dict) -> bool:
    return settings["record"] and settings["kernel"] in (None, python_fn.__name__)


def record_launch(python_fn, launcher: str, named: dict, options: dict, grid, launch, settings: dict):
    """Run `launch(named)` (the user's launch); record it when it is new. Returns what the launch returns."""
    if _quiet() or not _wanted(python_fn, settings):
        return launch(named)
    g = _grid(grid, named)
    key = _signature(python_fn, g, named)
    count = _per_kernel.get(python_fn.__name__, 0)
    if key in _seen or count >= settings["max_per_kernel"]:
        return launch(named)
    _seen.add(key)
    _per_kernel[python_fn.__name__] = count + 1
    tensors = {n: v for n, v in named.items() if describe.is_tensor(v)}
    before = {n: describe.span(t).detach().clone() for n, t in tensors.items()}
    try:
        result = launch(named)
        _synchronize(tensors)
    except Exception as exc:
        journal.note(FAILED + _failure(python_fn, exc))
        raise
    try:
        _write_record(python_fn, launcher, named, options, g, tensors, before, launch, settings)
    except Exception as exc:  # the user's program goes on: this launch is only not recorded, and said so
        journal.note(f"not recorded: a launch of {python_fn.__name__}: {type(exc).__name__}: {exc}")
    return result


def _replay(params: list[dict], tensors: dict, written: list[str], launch) -> dict | None:
    """The kernel once more on the inputs the kernel file will build (seed 0): a fingerprint of what it wrote,
    for the kernel file's own replay to match. None when an argument cannot be rebuilt."""
    if any(p["kind"] == "object" for p in params) or not written:
        return None
    device = next(iter(tensors.values())).device
    args = rebuild.seeded_arguments(params, 0, device)
    with _Within(quiet=True):
        launch(args)
    _synchronize(args)
    return {"seed": 0, "outputs": rebuild.fingerprint({n: args[n] for n in written})}


def _probe(named, before, tensors, launch, poisoned) -> dict:
    """The launch once more, on copies of every tensor (their layouts kept), the `poisoned` ones poisoned."""
    probe = dict(named)
    for n, t in tensors.items():
        probe[n] = describe.copy_with_layout(t, before[n])
        if n in poisoned:
            describe.poison(describe.span(probe[n]))
    with _Within(quiet=True):
        launch(probe)
    _synchronize(probe)
    return probe


def _writes_same_bits(name, named, before, tensors, launch) -> bool:
    """Whether an unchanged float tensor is an output that already held this launch's result (the autotuner's
    benchmark runs, or an earlier call, wrote it): a probe with it alone poisoned overwrites the poison.
    Integer tensors are not probed: poisoned indices would address memory out of bounds."""
    if not tensors[name].is_floating_point() or tensors[name].numel() == 0:
        return False
    probe = _probe(named, before, tensors, launch, {name})
    return not describe.same_bits(describe.span(probe[name]), _poisoned(before[name]))


def _poisoned(t):
    out = t.clone()
    describe.poison(out)
    return out


def _write_record(python_fn, launcher: str, named: dict, options: dict, g: list[int], tensors: dict, before: dict,
                  launch, settings: dict) -> None:
    """What the launch wrote and read, its arguments, its replay fingerprint and closure, as one JSON file."""
    changed = {n for n, t in tensors.items() if not describe.same_bits(describe.span(t), before[n])}
    written = [n for n in tensors if n in changed or _writes_same_bits(n, named, before, tensors, launch)]
    in_place = _reads_outputs(named, before, tensors, written, launch)
    consts = _constexprs(python_fn)
    params = [describe.param(n, v, before.get(n), n in consts, settings["max_values"]) for n, v in named.items()]
    for p in params:
        if p["kind"] == "tensor":
            p["written"], p["in_place"] = p["name"] in written, p["name"] in in_place
            p["zeros"] = not bool(describe.bits(before[p["name"]]).any())
    replayed = _replay(params, tensors, written, launch)
    if id(python_fn) not in _closures:
        _closures[id(python_fn)] = closure.collect(python_fn)
    journal.write({"format": 1, "seq": next(_seq), "launcher": launcher, "grid": g,
                   "kernel": _kernel_info(python_fn), "params": params, "options": _options(options),
                   "chosen": _chosen(named), "device": _device(tensors), "closure": _closures[id(python_fn)],
                   "cwd": os.getcwd(), "argv": list(sys.argv), "replay": replayed})


FAILED = "launch failed: "  # the note a failing launch leaves, for the capture's one line


def _failure(python_fn, exc: BaseException) -> str:
    """'K (file:line) raised E: message', and why when it is a limit of the CPU interpreter."""
    from swizzleperf.kernel import interpreter_limits
    root = exc
    while root.__cause__ is not None:
        root = root.__cause__
    text = f"{type(root).__name__}: {str(root).strip().splitlines()[-1] if str(root).strip() else ''}"
    try:
        source, path, line = closure.function_source(python_fn)
        units = closure.collect(python_fn)
    except (OSError, TypeError, SyntaxError):
        return f"{python_fn.__name__} raised {text}"
    name, message = os.path.basename(path), f"{type(exc).__name__}: {exc}"
    found = interpreter_limits.explain_failure(message, source)
    where = f"{name}:{line + found[1] - 1}" if found else ""
    if found is None:  # what the kernel imports: `from triton.language.extra.libdevice import rsqrt`
        imports = "\n".join(u["text"] for u in units["imports"] + units["unresolved"])
        found = interpreter_limits.explain_failure(message, imports)
        where = f"`{imports.splitlines()[found[1] - 1]}`" if found else ""
    why = f"; {interpreter_limits.sentence(found[0], where)}" if found else ""
    return f"{python_fn.__name__} ({name}:{line}) raised {text}{why}"


def _reads_outputs(named, before, tensors, written, launch) -> list[str]:
    """Outputs whose prior contents the launch reads: a probe on copies, those outputs poisoned, differs."""
    if not written:
        return []
    probe = _probe(named, before, tensors, launch, set(written))
    return [n for n in written if not describe.same_bits(describe.span(probe[n]), describe.span(tensors[n]))]


def _synchronize(tensors: dict) -> None:
    if any(str(getattr(t, "device", "cpu")).startswith("cuda") for t in tensors.values()):
        import torch
        torch.cuda.synchronize()


def _kernel_info(python_fn) -> dict:
    source, path, line = closure.function_source(python_fn)
    return {"name": python_fn.__name__, "module": python_fn.__module__, "qualname": python_fn.__qualname__,
            "file": path, "line": line}


def _options(options: dict) -> dict:
    keep = ("num_warps", "num_stages", "num_ctas", "maxnreg")
    return {k: v for k, v in options.items() if k in keep and type(v) in (int, type(None))}


def _device(tensors: dict) -> str:
    on = {str(t.device) for t in tensors.values()}
    if any(d.startswith("cuda") for d in on):
        import torch
        return torch.cuda.get_device_name()
    return "cpu (Triton interpreter)"


# --- the wrapped launch paths -----------------------------------------------------------------

def install(settings: dict) -> None:
    from triton.compiler import compiler
    from triton.runtime import autotuner, interpreter, jit

    from swizzleperf.kernel.interpreter_fixes import float_scalars_as_fp32
    float_scalars_as_fp32()
    _wrap_run(jit.JITFunction, "JITFunction.run", settings)
    _wrap_run(interpreter.InterpretedFunction, "the CPU interpreter", settings)
    _wrap_compiled(compiler.CompiledKernel, settings)
    _wrap_tuners(autotuner, settings)


def _wrap_run(cls, launcher: str, settings: dict) -> None:
    original = cls.run

    def run(self, *args, grid, warmup, **kwargs):
        if warmup:
            if settings["stand_in"] and cls.__name__ == "InterpretedFunction":
                return _WarmedUp(self, args, kwargs)  # the interpreter compiles nothing: stand in
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        named, options = _bind(self.fn, args, kwargs)

        def launch(values):
            if values is named:
                return original(self, *args, grid=grid, warmup=False, **kwargs)
            return original(self, grid=grid, warmup=False, **values, **options)

        return record_launch(self.fn, launcher, named, options, grid, launch, settings)

    cls.run = run


def _wrap_compiled(cls, settings: dict) -> None:
    """`kernel = f.warmup(...); kernel[grid](*every parameter)` launches without JITFunction.run."""
    original = cls.__getitem__

    def getitem(self, grid):
        runner = original(self, grid)
        python_fn = getattr(getattr(self.src, "fn", None), "fn", None)
        if python_fn is None:
            return runner

        def recorded(*args, stream=None):
            named = dict(zip(inspect.signature(python_fn).parameters, args))
            options = {"num_warps": self.metadata.num_warps, "num_stages": self.metadata.num_stages}

            def launch(values):
                return runner(*(args if values is named else values.values()), stream=stream)

            return record_launch(python_fn, "a compiled kernel after warmup", named, options, grid, launch, settings)

        return recorded

    cls.__getitem__ = getitem


class _WarmedUp:
    """What `warmup` returns under the interpreter while capturing: a compiled kernel's handle, stood in."""

    n_regs, n_spills = 32, 0
    SHARED = 32768  # bytes: a plausible kernel's (0 would divide occupancy formulas by zero)

    def __init__(self, fn, args, kwargs):
        import types
        self._fn, self._kwargs = fn, kwargs
        self.metadata = types.SimpleNamespace(shared=self.SHARED, num_warps=kwargs.get("num_warps", 4),
                                              num_stages=kwargs.get("num_stages", 3), name=fn.__name__)
        journal.note(f"stand-in: {fn.__name__}.warmup() under the interpreter: n_regs=32, {self.SHARED} bytes of "
                     f"shared memory (nothing is compiled)")

    def _init_handles(self):
        return None

    def __getitem__(self, grid):
        def runner(*args, stream=None):
            names = list(inspect.signature(self._fn.fn).parameters)
            given = dict(zip(names, args))
            rest = {k: v for k, v in self._kwargs.items() if k not in given}
            return self._fn.run(*args, grid=grid, warmup=False, **rest)
        return runner


def _wrap_tuners(autotuner, settings: dict) -> None:
    run, bench, heuristics = autotuner.Autotuner.run, autotuner.Autotuner._bench, autotuner.Heuristics.run

    def tuned_run(self, *args, **kwargs):
        if not (settings["stand_in"] and len(self.configs) > 1):
            with _Within(by="triton.autotune", tuner=self, how="the autotuner's choice"):
                return run(self, *args, **kwargs)
        self.nargs = dict(zip(self.arg_names, args))
        pruned = self.prune_configs(kwargs)
        pick = min(int(settings["config"]), len(pruned) - 1)
        saved, self.configs = self.configs, [pruned[pick]]
        how = (f"config {pick} of the {len(pruned)} left after pruning ({len(saved)} declared): the CPU "
               f"interpreter runs one, never benchmarks all (--config N picks another)")
        try:
            with _Within(by="triton.autotune", tuner=self, how=how):
                return run(self, *args, **kwargs)
        finally:
            self.configs = saved

    def quiet_bench(self, *args, **kwargs):
        with _Within(quiet=True):
            return bench(self, *args, **kwargs)

    def heuristics_run(self, *args, **kwargs):
        with _Within(by="triton.heuristics", names=list(self.values), how="computed by triton.heuristics"):
            return heuristics(self, *args, **kwargs)

    autotuner.Autotuner.run, autotuner.Autotuner._bench = tuned_run, quiet_bench
    autotuner.Heuristics.run = heuristics_run


def _chosen(named: dict) -> list[dict]:
    """Who chose which constexprs: the autotuner's config, the heuristics' values."""
    out = []
    for c in _context():
        if c.get("by") == "triton.autotune":
            config = getattr(c["tuner"], "best_config", None)
            out.append({"by": c["by"], "how": c["how"], "config": str(config),
                        "values": dict(getattr(config, "all_kwargs", dict)())})
        elif c.get("by") == "triton.heuristics":
            out.append({"by": c["by"], "how": c["how"], "values": {n: named.get(n) for n in c["names"]}})
    return out
