"""Numerical correctness of a kernel with a candidate remap spliced in, checked in a child process.

A remap that is a bijection on paper can still break a kernel (a wrong tuple order, a dtype
that overflows), so the candidate is run for real: the kernel file with the new hook is written
to a temp dir and imported in a child (the remap is untrusted code; the CPU path sets
TRITON_INTERPRET=1 there). For each size and seed the child builds inputs, prefills every output
with NaN (so a tile that no program writes cannot pass by luck), launches, and compares each
output with the PyTorch reference under the kernel's TOLERANCE (a kernel file without `reference()`
is compared with itself run with its own hook, unchanged, exactly unless TOLERANCE says otherwise); it also checks the inputs are
bit-for-bit unchanged. Only JSON comes back. A crash or timeout of the child is a failed
report, not an exception: the loop records it and moves on.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from swizzleperf.errors import ChildSetupError, ContractError, RemapRejected, SandboxError, SwizzlePerfError
from swizzleperf.kernel import user_errors
from swizzleperf.kernel.contract import KernelFile, load_kernel
from swizzleperf.kernel.interpreter_fixes import float_scalars_as_fp32
from swizzleperf.kernel.launches import describe
from swizzleperf.kernel.user_errors import FileMap
from swizzleperf.remaps.checked import CheckedCandidate, check_candidate
from swizzleperf.untrusted import source_text
from swizzleperf.untrusted.isolation import CPU_CHILD_MEMORY_MB, Confinement
from swizzleperf.untrusted.sandbox import default_confinement, run_in_child

_CHILD_TARGET = "swizzleperf.validation.correctness:check_cases_child"
CHILD_PRELOAD = ("triton", "triton.language")  # imported once by the fork server (untrusted.forkserver)
REFERENCE = "the reference"
ORIGINAL = "the kernel run with its own hook"  # the reference of a kernel file without reference()


class OutputCheck(BaseModel):
    """One output tensor of one case compared with the reference."""

    model_config = ConfigDict(extra="forbid")
    name: str
    numel: int
    mismatches: int = Field(description="elements outside atol + rtol * |reference| (NaN counts as a mismatch)")
    nans: int = Field(description="NaN elements where the reference has a number: most likely never written")
    max_abs_error: float | None = Field(description="over elements where both are finite; None if there are none")
    first_mismatch: list[int] | None = Field(None, description="index of the first mismatching element")
    shape_error: str | None = None
    against: str = Field(REFERENCE, description="what the output was compared with")

    @property
    def ok(self) -> bool:
        return self.shape_error is None and self.mismatches == 0

    def describe(self, atol: float, rtol: float) -> str:
        if self.shape_error is not None:
            return f"output {self.name}: {self.shape_error.replace('the reference', self.against)}"
        where = f"first at index {tuple(self.first_mismatch)}" if self.first_mismatch is not None else ""
        error = f"max abs error {self.max_abs_error:.3g}" if self.max_abs_error is not None else ""
        detail = ", ".join(p for p in (error, where) if p)
        if self.nans:
            return (f"output {self.name} has {self.nans} NaN elements of {self.numel} (programs never ran?) and "
                    f"{self.mismatches} mismatches in all ({detail})")
        beyond = f"beyond atol={atol:g}, rtol={rtol:g}" if atol or rtol else "(compared exactly)"
        return (f"output {self.name}: {self.mismatches} of {self.numel} elements differ from {self.against} "
                f"{beyond} ({detail})")


class CaseResult(BaseModel):
    """One (size, seed): a launch error, or the checks of every output and input."""

    model_config = ConfigDict(extra="forbid")
    size: str
    seed: int
    error: str | None = Field(None, description="what the case raised instead of finishing")
    outputs: list[OutputCheck] = Field(default_factory=list)
    modified_inputs: dict[str, int] = Field(default_factory=dict, description="input name -> elements changed")
    seconds: float

    @property
    def ok(self) -> bool:
        return self.error is None and not self.modified_inputs and all(o.ok for o in self.outputs)

    def reason(self, atol: float, rtol: float) -> str | None:
        """Why the case failed, in one sentence; None when it passed."""
        problems = [] if self.error is None else [self.error]
        problems += [o.describe(atol, rtol) for o in self.outputs if not o.ok]
        problems += [f"the kernel modified its input {name} ({n} elements changed)"
                     for name, n in self.modified_inputs.items()]
        return f"size {self.size} seed {self.seed}: " + "; ".join(problems) if problems else None


class CorrectnessReport(BaseModel):
    """Whether a kernel with a remap matches its reference on every checked (size, seed)."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = 1
    kernel: str
    device: str
    num_xcds: int
    sizes: list[str]
    seeds: list[int]
    tolerance: dict[str, float]
    cases: list[CaseResult] = Field(default_factory=list, description="in the order run")
    failure: str | None = Field(None, description="the first failure, in a sentence; None when all passed")
    seconds: float
    against: str = Field(REFERENCE, description="what the outputs were compared with")
    float32: bool = Field(False, description="every float tensor ran as float32 (CPU_CHECK_FLOAT32 on the CPU)")

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def summary(self) -> str:
        """One sentence for histories, prompts and the CLI."""
        if self.failure is not None:
            return self.failure
        return (f"matches {self.against} on {len(self.cases)} case(s): sizes {', '.join(self.sizes)} x seeds "
                f"{', '.join(map(str, self.seeds))} on {self.device}{', float tensors as float32' * self.float32} "
                f"({self.num_xcds} XCDs)")

    def raise_if_failed(self) -> None:
        if self.failure is not None:
            raise RemapRejected("correctness", self.failure)

    @classmethod
    def from_cases(cls, kernel: KernelFile, cases: list[CaseResult], *, device: str, num_xcds: int, sizes: list[str],
                   seeds: list[int], seconds: float, failure: str | None = None,
                   float32: bool = False) -> CorrectnessReport:
        """The report of the cases that ran; failure: why none ran, else the first failing case's reason."""
        atol, rtol = kernel.tolerance["atol"], kernel.tolerance["rtol"]
        failure = failure or next((c.reason(atol, rtol) for c in cases if not c.ok), None)
        return cls(kernel=kernel.name, device=device, num_xcds=num_xcds, sizes=sizes, seeds=seeds,
                   tolerance=kernel.tolerance, cases=cases, failure=failure, seconds=seconds,
                   against=REFERENCE if kernel.has_reference else ORIGINAL, float32=float32)


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def sizes_to_check(kernel: KernelFile, sizes: list[str] | None, device: str) -> list[str]:
    """The sizes asked for, or by default CHECK_SIZES on the CPU interpreter and every size on a GPU."""
    if sizes is None:
        return list(kernel.check_sizes if device == "cpu" else kernel.sizes)
    for name in sizes:
        kernel.size(name)  # raises ContractError naming the declared sizes
    return list(sizes)


def check_correctness(kernel: KernelFile, remap_source: str, sizes: list[str] | None = None,
                      seeds: tuple[int, ...] = (0, 1), num_xcds: int = 8, device: str | None = None,
                      timeout: float = 120.0, checked: CheckedCandidate | None = None) -> CorrectnessReport:
    """Run the kernel with `remap_source` as its hook in a child and compare with the reference.

    sizes: CHECK_SIZES on the CPU interpreter, every declared size on a GPU. device: "cuda" when
    torch sees a GPU, else "cpu". Raises ContractError for an unknown size, or when the kernel
    file itself (with its own hook) does not load in a fresh process; any failure caused by the
    remap, a crash or a timeout included, is a failed report. `checked`: the candidate as the static stage
    left it (remaps.checked), so its counted work is read from those trees.
    """
    device = device or default_device()
    sizes = sizes_to_check(kernel, sizes, device)
    settings = dict(device=device, num_xcds=int(num_xcds), sizes=sizes, seeds=[int(s) for s in seeds],
                    float32=device == "cpu" and kernel.cpu_float32)
    t0 = time.perf_counter()

    def failed(reason: str) -> CorrectnessReport:
        return CorrectnessReport.from_cases(kernel, [], **settings, seconds=time.perf_counter() - t0, failure=reason)

    over = _over_budget(kernel, remap_source, sizes, seeds, int(num_xcds), checked) if device == "cpu" else None
    if over is not None:
        return failed(over)
    with tempfile.TemporaryDirectory(prefix="swizzleperf-correctness-") as tmp:
        payload = {**_child_files(kernel, remap_source, Path(tmp)), **settings,
                   "files": _file_map(kernel, remap_source).to_json()}
        # Triton reads the flag as @triton.jit functions are built (its own, at import): set it both ways.
        env = {"TRITON_INTERPRET": "1" if device == "cpu" else "0"}
        if device == "cpu":
            env["MALLOC_ARENA_MAX"] = "4"  # each thread's arena reserves 64 MB of the address space capped below
        try:
            child = run_in_child(_CHILD_TARGET, payload, timeout, env=env,
                                 what="the correctness check", confinement=_confinement(device, timeout))
        except ChildSetupError:
            raise  # the installation's fault: the remap was not checked
        except SandboxError as exc:
            return failed(str(exc))

    setup_error = child.value.get("setup_error")
    if setup_error is not None:
        if remap_source.strip() == kernel.hook_source.strip():
            raise ContractError(f"{kernel.path.name} does not load from a copy in a fresh process ({setup_error}); "
                                f"a kernel file must be self-contained")
        return failed(f"the kernel with this remap does not load: {setup_error}")
    cases = [CaseResult.model_validate(c) for c in child.value["cases"]]
    if remap_source.strip() == kernel.hook_source.strip():  # the kernel's own code failed: say how to see it again
        for case in cases:
            if case.error is not None:
                case.error += f"; reproduce with: {user_errors.check_command(kernel.path, case.size, case.seed)}"
    return CorrectnessReport.from_cases(kernel, cases, **settings, seconds=time.perf_counter() - t0)


def _child_files(kernel: KernelFile, remap_source: str, tmp: Path) -> dict[str, str]:
    """The kernel with the remap spliced in, written under `tmp`, and (when the kernel declares no reference)
    the kernel as it is, to compare with."""
    spliced = tmp / kernel.path.name
    spliced.write_text(kernel.with_hook(remap_source))
    files = {"kernel_path": str(spliced)}
    if not kernel.has_reference:
        original = tmp / "original" / kernel.path.name
        original.parent.mkdir()
        original.write_text(kernel.source)
        files["reference_path"] = str(original)
    return files


def _over_budget(kernel: KernelFile, remap_source: str, sizes: list[str], seeds, num_xcds: int,
                 checked: CheckedCandidate | None) -> str | None:
    """Why the candidate is too much work for the CPU interpreter (swizzleperf.remaps.work), counted before it runs.
    Only hooks inside the remap subset can be counted; anything else is the child's to judge, as before."""
    from swizzleperf.remaps.work import INTERPRETER_WORK, LOOP_ORDER_CALL_WORK, per_program, require_work

    try:
        checked = checked if checked is not None else check_candidate(remap_source, kernel)
    except RemapRejected:
        return None
    fn, order = checked.remap, checked.loop_order
    try:
        programs = sum(math.prod(kernel.grid(size)) for size in sizes) * max(1, len(seeds))
        require_work(fn, {name: num_xcds for name in kernel.hook.constexprs}, programs, INTERPRETER_WORK,
                     "correctness", "the correctness runs in the CPU interpreter")
    except RemapRejected as exc:
        return exc.reason
    per_call = per_program(order, {name: num_xcds for name in kernel.loop_order.constexprs}) if order else 0
    if per_call > LOOP_ORDER_CALL_WORK:  # the kernel, not the hook, sets how often it runs: counted per call
        return (f"counted work {per_call:,} node evaluations per call of the loop-order hook (it runs at every step "
                f"of every tile) exceeds the budget of {LOOP_ORDER_CALL_WORK:,} a call: simplify the loop order "
                f"(fewer operations, shorter loops)")
    return None


def _file_map(kernel: KernelFile, remap_source: str) -> FileMap:
    """The lines of the kernel file with `remap_source` as its hook, as lines of the user's file."""
    shift = len(source_text.lines(kernel.with_hook(remap_source))) - len(source_text.lines(kernel.source))
    return FileMap(user_errors.shown_path(kernel.path), hook_start=kernel.hook_lines[0],
                   hook_end_run=kernel.hook_lines[1] + shift, shift=shift)


def _confinement(device: str, timeout: float) -> Confinement:
    """On the CPU interpreter the suite's kernels peak near 1 GB of address space (330 MB resident) with
    torch and Triton loaded; 4 threads keep the thread pools' reservations (OpenBLAS buffers, stacks)
    from scaling with the machine's cores, so 8 GB holds anywhere. On a GPU the driver cannot start
    under any address-space cap (CUDA failed at 4 and 16 GB on an H100), so only CPU time and file
    size are capped there."""
    base = default_confinement(timeout)
    if device != "cpu":
        return base
    return dataclasses.replace(base, memory_mb=CPU_CHILD_MEMORY_MB, network=False, threads=4)


# --- child side ------------------------------------------------------------------------------

def check_cases_child(payload: dict, workdir: Path) -> dict:
    """Sandbox entry point: load the spliced kernel file and run every (size, seed) case."""
    if payload["device"] == "cpu":
        float_scalars_as_fp32()
    try:
        kernel = load_kernel(payload["kernel_path"])
        original = load_kernel(payload["reference_path"]) if payload.get("reference_path") else None
    except SwizzlePerfError as exc:
        return {"setup_error": str(exc).split("\n\nExpected shape:")[0], "cases": []}
    cases = run_cases(kernel, payload["sizes"], payload["seeds"], payload["num_xcds"], payload["device"], original,
                      FileMap(**payload["files"]), payload["float32"])
    return {"cases": [c.model_dump(mode="json") for c in cases]}


def run_cases(kernel: KernelFile, sizes: list[str], seeds: list[int], num_xcds: int, device: str,
              original: KernelFile | None = None, files: FileMap | None = None, float32: bool = False) -> list[CaseResult]:
    """Every (size, seed) case, in this process: only for a kernel already loaded as the child does.
    `original`: the kernel with its own hook, the reference of a kernel file without reference();
    `files`: how the lines of `kernel`'s file map to the user's (errors name the user's lines)."""
    files = files or FileMap(user_errors.shown_path(kernel.path))
    return [run_case(kernel, size, seed, num_xcds, device, original, files, float32)
            for size in sizes for seed in seeds]


def run_case(kernel: KernelFile, size_name: str, seed: int, num_xcds: int, device: str,
             original: KernelFile | None, files: FileMap, float32: bool = False) -> CaseResult:
    """One launch on fresh inputs and NaN-filled outputs, checked against the reference."""
    t0 = time.perf_counter()
    size = kernel.size(size_name)
    step = "make_inputs"
    try:
        inputs = _as_float32(kernel.fn("make_inputs")(size, seed, device), float32)
        pristine = {name: _clone(t) for name, t in inputs.items()}
        step = "make_outputs"
        outputs = _as_float32(kernel.fn("make_outputs")(size, device), float32)
        for t in outputs.values():
            describe.poison(t)
        step = "launch"
        kernel.fn("launch")(inputs, outputs, size, num_xcds)
        if device != "cpu":
            torch.cuda.synchronize()  # surfaces an asynchronous fault here, inside the case
        modified = {name: changed for name, t in inputs.items() if (changed := _changed_elements(t, pristine[name]))}
        step = "reference" if kernel.has_reference else "the original kernel (the reference)"
        expected = _expected(kernel, original or kernel, pristine, size, num_xcds, device, float32)
        if set(expected) != set(outputs):
            raise ContractError(f"reference() returned {sorted(expected)} but make_outputs() made {sorted(outputs)}")
        step = "the comparison"
        against = REFERENCE if kernel.has_reference else ORIGINAL
        checks = [compare(name, outputs[name], expected[name], **kernel.tolerance, against=against)
                  for name in outputs]
    except Exception as exc:  # the candidate's failure, reported as this case's result
        if step.startswith("the original kernel") and original is not None:  # its own file: the user's lines
            error = user_errors.describe(step, exc, original.path, FileMap(files.shown))
        else:
            error = user_errors.describe(step, exc, kernel.path, files)
        error += user_errors.size_hint(exc, kernel.path, size_name, size)
        return CaseResult(size=size_name, seed=seed, error=error, seconds=time.perf_counter() - t0)
    return CaseResult(size=size_name, seed=seed, outputs=checks, modified_inputs=modified,
                      seconds=time.perf_counter() - t0)


def _expected(kernel: KernelFile, original: KernelFile, pristine: dict, size: dict, num_xcds: int, device: str,
              float32: bool = False) -> dict:
    """reference(), or without one the original kernel's outputs on copies of the same inputs."""
    if kernel.has_reference:
        return kernel.fn("reference")(pristine, size)
    inputs = {name: _clone(t) for name, t in pristine.items()}
    outputs = _as_float32(original.fn("make_outputs")(size, device), float32)
    for t in outputs.values():
        describe.poison(t)
    original.fn("launch")(inputs, outputs, size, num_xcds)
    if device != "cpu":
        torch.cuda.synchronize()
    return outputs


def _as_float32(tensors: dict, on: bool) -> dict:
    """Every floating tensor as float32 with its layout (CPU_CHECK_FLOAT32); the others as they are."""
    if not on:
        return tensors
    return {name: describe.copy_with_layout(t, describe.span(t), torch.float32)
            if t.is_floating_point() and t.dtype != torch.float32 else t for name, t in tensors.items()}


def _clone(t):
    """A copy with the same strides, offset and padding: a kernel given its strides as arguments reads it alike."""
    return describe.copy_with_layout(t, describe.span(t))


def _changed_elements(now, before) -> int:
    """Elements whose bits differ (so a NaN left in place is unchanged, and -0.0 != 0.0)."""
    if now.shape != before.shape or now.dtype != before.dtype:
        return max(now.numel(), 1)
    return int((describe.bits(now) != describe.bits(before)).sum())


def compare(name: str, out, ref, atol: float, rtol: float, against: str = REFERENCE) -> OutputCheck:
    """Elementwise |out - ref| <= atol + rtol * |ref| in float64; NaN matches only a NaN reference."""
    if tuple(out.shape) != tuple(ref.shape):
        return OutputCheck(name=name, numel=out.numel(), mismatches=out.numel(), nans=0, max_abs_error=None,
                           shape_error=f"has shape {tuple(out.shape)}, {against} {tuple(ref.shape)}", against=against)
    o = out.detach().to(torch.float64)
    r = ref.detach().to(out.device, torch.float64)
    bad = ~torch.isclose(o, r, rtol=rtol, atol=atol, equal_nan=True)
    finite = torch.isfinite(o) & torch.isfinite(r)
    diffs = (o - r).abs()[finite]
    first = None
    if bad.any():
        flat = int(torch.nonzero(bad.flatten())[0])
        first = [int(i) for i in np.unravel_index(flat, tuple(out.shape))]
    return OutputCheck(name=name, numel=out.numel(), mismatches=int(bad.sum()),
                       nans=int((torch.isnan(o) & ~torch.isnan(r)).sum()),
                       max_abs_error=float(diffs.max()) if diffs.numel() else None, first_mismatch=first, against=against)
