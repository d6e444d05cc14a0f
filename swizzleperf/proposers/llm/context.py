"""What the model is shown: the hardware text, the bottleneck report, the attempt history.

The method's point is a *curated* context: a few sentences about the dies and the dispatch
policy, and the profile numbers that say where the misses come from (per-die hit rates, how
many dies fetch each line, the ceiling). The two baselines of the paper replace it: the
hardware-unaware mode shows no hardware at all, the hardware-overload mode a long uncurated
architecture text. Every number says whether it was predicted by the simulator or measured.
"""

from __future__ import annotations

import ast
from typing import Literal

from swizzleperf.hardware.presets import MiB
from swizzleperf.hardware.spec import HardwareSpec
from swizzleperf.kernel.contract import HookSignature, KernelFile
from swizzleperf.proposers.llm.templates import PromptSet
from swizzleperf.records.proposal import AttemptView
from swizzleperf.records.report import BottleneckReport, ceiling_text, headroom_text
from swizzleperf.untrusted import source_text

Mode = Literal["aware", "unaware", "overload"]
MODES: tuple[Mode, ...] = ("aware", "unaware", "overload")
NO_HARDWARE = "Not provided."

_DIFF_LINES = 40       # per attempt in the history
_REASON_CHARS = 600    # a rejected attempt's reason, e.g. a compiler error


def _source_phrase(report: BottleneckReport) -> str:
    return "predicted by the simulator" if report.simulated else f"measured with {report.source}"


def _dispatch_rule(spec: HardwareSpec) -> str:
    n, chunk = spec.num_domains, spec.dispatch.chunk
    if chunk == 1:
        return (f"program id w runs on XCD w % {n}, so programs 0..{n - 1} land on XCDs 0..{n - 1} "
                f"and program {n} is back on XCD 0")
    return (f"ids go out in chunks of {chunk}: program id w runs on XCD (w // {chunk}) % {n}, "
            f"so programs 0..{chunk - 1} share XCD 0 and program {chunk} starts XCD 1")


def _dies_note(spec: HardwareSpec, hook: HookSignature | None) -> str:
    if hook is None or not hook.constexprs:
        return ""
    if spec.num_domains > 1:
        return f"The remap function receives the XCD count as {hook.constexprs[0]} (= {spec.num_domains})."
    return (f"The remap function's {hook.constexprs[0]} parameter is {spec.num_domains} here "
            f"(there is one L2); a remap may still use its own group size.")


def describe_hardware(spec: HardwareSpec, prompts: PromptSet, hook: HookSignature | None = None) -> str:
    """The curated hardware text: dies, caches, dispatch policy, residency."""
    values = dict(
        gpu=spec.name, num_domains=spec.num_domains, cus_per_domain=spec.cus_per_domain,
        l2_mb=f"{spec.l2_bytes_per_domain / MiB:g}", l2_ways=spec.l2_ways, line_bytes=spec.line_bytes,
        next_level=spec.next_level or "next memory level", programs_per_cu=spec.programs_per_cu,
        resident=spec.resident_programs_per_domain, dies_note=_dies_note(spec, hook))
    if spec.dispatch.policy == "round_robin":
        return prompts.render("hardware_multi_die.md", dispatch_rule=_dispatch_rule(spec), **values)
    return prompts.render("hardware_shared_l2.md", scheduler_note=_scheduler_note(spec), **values)


def _scheduler_note(spec: HardwareSpec) -> str:
    """Where blocks after the first wave run, where the spec knows the scheduler's walk (sim/scheduler.py)."""
    if spec.dispatch.walk is None:
        return ""
    side = (f" on one of the L2's {spec.l2_partitions} partitions: a line one of them fetched is a hit for the "
            f"other there (from the other partition it is a far hit, which counts as a miss)"
            if spec.l2_partitions > 1 else "")
    return (f"After the first wave, the scheduler gives each freed slot the next block, walking its SM order on "
            f"from the SM it served last, so blocks with consecutive ids often run on nearby SMs{side}.")


def describe_profile(report: BottleneckReport, spec: HardwareSpec, subject: str = "the original kernel") -> str:
    """Where the misses come from, per L2 domain, with the ceiling and the duplication factor.

    `subject` names whose profile it is (the original kernel's, or the best remap's so far)."""
    die = "XCD" if spec.vendor == "amd" else "L2 domain"
    lines = [f"Profile of {subject} at size {report.size}, {_source_phrase(report)}:"]
    head = f"- {report.metric_name} rate {report.hit_pct:.2f}%"
    if report.ceiling_pct is not None:
        head += (f"; {ceiling_text(report.ceiling_pct)} (every read-only line or sector fetched once in the whole "
                 f"GPU); {headroom_text(report, report.ceiling_pct)}")
    if report.achievable_pct is not None and spec.num_domains > 1:
        head += (f"; achievable {report.achievable_pct:.2f}% (the best balanced assignment of programs to "
                 f"{die}s a partitioner found)")
    lines.append(head + ".")
    if report.achievable_grouping and spec.num_domains > 1 and report.short_of_achievable:
        lines.append(f"- {report.achievable_grouping} (die = {die}). A remap that gives every {die} a group "
                     f"like this one approaches the achievable rate.")
    fetched = [d.unique_lines for d in report.per_domain]
    if report.unique_lines and len(fetched) > 1 and all(u is not None for u in fetched):
        total = sum(fetched)
        lines.append(f"- Distinct lines fetched by each {die}, summed over the {len(fetched)} {die}s: {total:,}; "
                     f"distinct lines in the whole kernel: {report.unique_lines:,}. On average every line is "
                     f"fetched by {total / report.unique_lines:.2f} {die}s (1.00 means no duplication).")
    if len(report.per_domain) > 1:
        lines.append(f"- Per {die}:")
        lines.append(f"  {die:>9}  {'programs':>9}  {'accesses':>12}  {'hit %':>7}  {'distinct lines':>14}")
        for d in report.per_domain:
            programs = "-" if d.programs is None else f"{d.programs:,}"
            unique = "-" if d.unique_lines is None else f"{d.unique_lines:,}"
            lines.append(f"  {d.domain:>9}  {programs:>9}  {d.accesses:>12,}  {d.hit_pct:>7.2f}  {unique:>14}")
    return "\n".join(lines)


def hardware_context(mode: Mode, spec: HardwareSpec, report: BottleneckReport, prompts: PromptSet,
                     hook: HookSignature | None = None, subject: str = "the original kernel") -> str:
    """The `hardware` input of both model calls, in the chosen mode; `subject`: whose profile `report` is."""
    if mode == "aware":
        return describe_hardware(spec, prompts, hook) + "\n\n" + describe_profile(report, spec, subject)
    if mode == "unaware":
        return NO_HARDWARE
    if mode == "overload":
        return f"Target GPU: {spec.name}.\n\n" + prompts.raw("hardware_overload.md").strip()
    raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")


def report_summary(mode: Mode, report: BottleneckReport) -> str:
    """The bottleneck report line; without any per-die detail when the model must not see hardware."""
    if mode != "unaware":
        return report.summary()
    parts = [f"{report.metric_name} {report.hit_pct:.2f}% {report.label}"]
    if report.ceiling_pct is not None:
        parts.append(f"ceiling {report.ceiling_pct:.2f}%")
    if report.timing is not None:
        parts.append(f"time {report.timing.median_ms:.4f} ms")
    return "; ".join(parts)


def describe_problem(kernel: KernelFile) -> str:
    """Kernel name, hook, and the grid at every declared size (the remap must be a bijection at each)."""
    sizes = "; ".join(f"{name} {kernel.sizes[name]} -> grid {_grid_text(kernel, name)}" for name in kernel.sizes)
    return (f"Kernel file {kernel.path.name}; remap function `{kernel.hook.render()}`; default size "
            f"{kernel.default_size}. Sizes: {sizes}.")


def _grid_text(kernel: KernelFile, size: str) -> str:
    extents = kernel.grid(size)
    if len(extents) == 1:
        return f"{extents[0]:,} programs"
    named = ", ".join(f"{p}={e:,}" for p, e in zip(kernel.hook.grid_params, extents))
    return f"({named})"


def grid_sizes(kernel: KernelFile) -> str:
    return ", ".join(f"{name}: {_grid_text(kernel, name)}" for name in kernel.sizes)


def returns_text(hook: HookSignature) -> str:
    if hook.ndim == 1:
        return f"one logical program id in [0, {hook.grid_params[0]})"
    ranges = ", ".join(f"0 <= logical {p} < {p}" for p in hook.grid_params)
    return f"a tuple of {hook.ndim} logical indices ({ranges})"


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f" ... [{len(text) - limit} more characters]"


def _clip_diff(diff: str) -> str:
    lines = diff.strip().splitlines()
    if len(lines) <= _DIFF_LINES:
        return "\n".join(lines)
    return "\n".join(lines[:_DIFF_LINES] + [f"... [{len(lines) - _DIFF_LINES} more diff lines]"])


def _attempt_text(attempt: AttemptView) -> str:
    head = f"### iteration {attempt.iteration} ({attempt.origin}, {attempt.family})"
    if attempt.accepted:
        outcome = f"accepted; {attempt.report}" if attempt.report else (
            f"accepted; L2 hit {attempt.hit_pct:.2f}%" if attempt.hit_pct is not None else "accepted")
    else:
        stage = f" at {attempt.stage}" if attempt.stage else ""
        reason = attempt.reason or "no reason recorded"
        if attempt.stage and reason.startswith(f"{attempt.stage}: "):  # a check's own message names its stage
            reason = reason[len(attempt.stage) + 2:]
        outcome = f"REJECTED{stage}: {_clip(reason, _REASON_CHARS)}"
    if attempt.diff.strip():
        diff = _clip_diff(attempt.diff)
    else:
        diff = "(no change: the original remap)" if attempt.accepted else "(no diff: no usable code was recorded)"
    return f"{head}\nOutcome: {outcome}\nChange against the original remap function:\n```diff\n{diff}\n```"


def select_attempts(history: list[AttemptView], limit: int) -> tuple[list[AttemptView], int]:
    """At most `limit` attempts: the best accepted one always, then the most recent. Returns (shown, omitted)."""
    if limit < 1 or not history:
        return [], len(history)
    chosen: list[AttemptView] = []
    scored = [a for a in history if a.accepted and a.hit_pct is not None]
    if scored:
        chosen.append(max(scored, key=lambda a: a.hit_pct))
    for attempt in reversed(history):
        if len(chosen) >= limit:
            break
        if attempt not in chosen:
            chosen.append(attempt)
    chosen.sort(key=lambda a: a.iteration)
    return chosen, len(history) - len(chosen)


def describe_history(history: list[AttemptView], limit: int) -> str:
    """The bounded history: each attempt's diff and outcome; failures with their reasons."""
    if not history:
        return "No attempts yet: this is the first one."
    shown, omitted = select_attempts(history, limit)
    parts = []
    if omitted:
        best = " (the best accepted attempt is among those shown)" if any(a.accepted for a in shown) else ""
        parts.append(f"{omitted} older attempt(s) are not shown{best}.")
    parts.extend(_attempt_text(a) for a in shown)
    parts.append("Do not repeat any of these implementations.")
    return "\n\n".join(parts)


def hook_and_callers(kernel: KernelFile) -> str:
    """The kernel file cut to its hooks and the functions that call them (the shortest source a prompt
    shows): the host code, the reference and the problem declaration are left out, and a comment says so."""
    tree = ast.parse(kernel.source)
    hooks = {kernel.hook.name} | ({kernel.loop_order.name} if kernel.loop_order else set())
    kept = [node for node in tree.body if isinstance(node, ast.FunctionDef)
            and (node.name in hooks or any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                                           and n.func.id in hooks for n in ast.walk(node)))]
    texts = [source_text.function_text(kernel.source, node).rstrip() for node in kept]
    left = len(source_text.lines(kernel.source)) - sum(len(t.splitlines()) for t in texts)
    names = ", ".join(f"{node.name}()" for node in kept)
    return "\n\n\n".join([f"# {kernel.path.name}, cut to fit the model's context window: only {names} are "
                           f"shown; {left} other lines (imports, host code, sizes, reference) are left out", *texts])
