"""What a run leaves for people: best/, report.md and its pictures.

Everything here is derived from run.json and attempts.jsonl, so it can be rewritten at any time
(`swizzleperf optimize --resume RUN` rewrites it when the resumed loop stops), except tiles.png's panel of the achievable
bound's assignment: an array not on disk, lent by the profiler that found it (without it, two panels).
"""

from __future__ import annotations

import ast
import math
import textwrap

import numpy as np

from swizzleperf.hardware.dispatch import slot_domains
from swizzleperf.hardware.spec import hook_constants
from swizzleperf.hardware.waves import cannot_matter, size_advice
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.loop import plots
from swizzleperf.loop.history import History, ranked_headline, slower_reason, time_cells, within_noise
from swizzleperf.loop.rundir import RunDir
from swizzleperf.profilers.timer import speedup
from swizzleperf.records.attempt import Attempt
from swizzleperf.records.report import BottleneckReport, bounds_text, ceiling_text, headroom_text
from swizzleperf.remaps.placement import grouping_sentence
from swizzleperf.untrusted import source_text
from swizzleperf.validation.bijectivity import logical_ids
from swizzleperf.validation.proof_status import docstring_line, proof_tag


def provenance(run: RunDir, attempt: Attempt) -> str:
    """Where a remap came from and what it scored, for its docstring."""
    rec = run.record
    report = attempt.report
    assert report is not None
    lines = [
        f"{attempt.family}: found by swizzleperf run {rec.run_id} (iteration {attempt.iteration}, {attempt.origin}).",
        f"Kernel {rec.kernel.name} (sha256 {rec.kernel.sha256[:12]}), size {rec.size}, hardware {rec.hardware.name}.",
        f"{report.metric_name} rate {report.hit_pct:.2f}% {report.label}; baseline {rec.baseline_hit_pct:.2f}%, "
        f"{ceiling_text(rec.ceiling_pct)}." if rec.baseline_hit_pct is not None
        else f"{report.metric_name} rate {report.hit_pct:.2f}% {report.label}.",
    ]
    bij = next((s for s in attempt.stages if s.stage == "bijectivity"), None)
    if bij is not None and bij.data and bij.data.get("grids"):
        lines.append(docstring_line(bij.data.get("proof"), bij.data["grids"], "proof_text" in bij.data))
    return "\n".join(lines)


def with_docstring(source: str, doc: str) -> str:
    """Replace (or add) the function's docstring, keeping the rest of the text as written."""
    fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef))
    lines = [line.rstrip("\r\n") for line in source_text.lines(source)]  # the lines the parser numbered
    first = fn.body[0]
    indent = " " * first.col_offset
    quoted = indent + '"""' + textwrap.indent(doc, indent).lstrip() + '\n' + indent + '"""'
    has_doc = isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
        and isinstance(first.value.value, str)
    if has_doc:
        lines[first.lineno - 1:first.end_lineno] = quoted.splitlines()
    else:
        lines[first.lineno - 1:first.lineno - 1] = quoted.splitlines()
    return "\n".join(lines) + "\n"


def write_best(run: RunDir, kernel: KernelFile, best: Attempt) -> None:
    run.best_dir.mkdir(exist_ok=True)
    remap = with_docstring(best.source, provenance(run, best))
    (run.best_dir / kernel.path.name).write_text(kernel.with_hook(remap))
    module = ('"""A remap found by swizzleperf; import it and call it at the top of a kernel."""\n\n'
              "import triton\nimport triton.language as tl\n\n\n" + remap)
    (run.best_dir / "remap.py").write_text(module)


def achievable_sentence(report: BottleneckReport, num_domains: int) -> str | None:
    """Multi-die: what the achievable bound would need where the best remap misses it (the grouping to
    imitate), or that the best remap reaches it; None where the bound or its grouping is unknown."""
    if num_domains < 2 or report.achievable_pct is None:
        return None
    if not report.short_of_achievable:
        return "The best remap already reaches the achievable bound."
    split = _assignment_and_capacity(report)
    if report.achievable_grouping is None:
        return split
    if report.achievable_fetches is not None and report.accesses is not None and report.hits is not None:
        return (f"{report.achievable_grouping}: the best remap fetches {report.accesses - report.hits:,} "
                f"against that assignment's {report.achievable_fetches:,}." + (f" {split}" if split else ""))
    return f"{report.achievable_grouping}: the best remap's {report.hit_pct:.2f}% is short of it."


def _assignment_and_capacity(report: BottleneckReport) -> str | None:
    """What separates the best remap from the achievable assignment, in words (BottleneckReport.assignment_split)."""
    if (split := report.assignment_split) is None:
        return None
    first, assignment, capacity = split
    above = report.fetches - report.achievable_fetches
    if assignment <= 0:
        return (f"Its assignment is as good as that one (its dies first-touch {first:,}, that assignment fetches "
                f"{report.achievable_fetches:,}): the {above:,} fetches above are capacity, lines fetched again after "
                f"an eviction, which no other remap's assignment removes.")
    return (f"Of the {above:,} fetches above that assignment, {assignment:,} are its assignment (its dies first-touch "
            f"{first:,}) and {capacity:,} capacity (fetched again after an eviction, which no assignment removes).")


def write_pictures(run: RunDir, kernel: KernelFile, history: History, best: Attempt | None,
                   best_ids: np.ndarray | None, achievable: np.ndarray | None = None) -> list[str]:
    """hit_rate.png, and tiles.png: the original and best remaps, and the achievable bound's assignment
    (die per logical program) where the best remap falls short of it."""
    rec = run.record
    baseline = history.baseline()
    label = baseline.report.label if baseline and baseline.report else "L2 hit rate"
    names = [plots.plot_hit_rate(history, rec.ceiling_pct, label, run.path / "hit_rate.png").name]
    if best is not None and best_ids is not None:
        grid = kernel.grid(rec.size)
        consts = hook_constants(kernel, rec.hardware)
        panels = [("original remap", logical_ids(kernel.hook_source, kernel.hook, grid, consts)),
                  (f"best: {best.family}", best_ids)]
        if achievable is not None and best.report is not None and best.report.short_of_achievable:
            panels.append(plots.DiePanel("achievable grouping (partitioner)", achievable))
        domains = slot_domains(int(panels[0][1].size), rec.hardware)
        names.append(plots.plot_tile_map(panels, domains, grid, rec.hardware.num_domains,
                                         run.path / "tiles.png").name)
    return names


def _bijectivity_data(a: Attempt) -> dict:
    return next((s.data or {} for s in a.stages if s.stage == "bijectivity"), {})


def _row(a: Attempt, baseline: Attempt | None, timed: bool) -> str:
    failure, slower = a.failure, slower_reason(a, baseline)
    hit = f"{a.report.hit_pct:.2f}" if a.report else ""
    verdict = f"ok; {proof_tag(_bijectivity_data(a))}" + (f"; {slower}" if slower else "") if a.accepted \
        else f"rejected ({failure.stage}): {failure.detail}" if failure else "incomplete"
    verdict = verdict.replace("|", "\\|").replace("\n", " ")
    times = "".join(f" {cell} |" for cell in time_cells(a, baseline)) if timed else ""
    return f"| {a.iteration} | {a.origin} | `{a.family}` | {hit} |{times} {a.seconds:.1f} | {verdict} |"


def size_advice_for(kernel: KernelFile, size: str, hw) -> tuple[str | None, bool]:
    """The sentence on whether `size` is large enough for a remap to matter on `hw`, and whether it cannot
    matter at all (then no gap to the ceiling is headroom). Persistent kernels launch a fixed number of
    programs whatever the size: not judged."""
    if kernel.persistent:
        return None, False
    programs = {name: math.prod(kernel.grid(name)) for name in kernel.sizes}
    return size_advice(size, programs, hw), cannot_matter(programs[size], hw) is not None


def write_report(run: RunDir, history: History, pictures: list[str], grouping: str | None = None,
                 advice: tuple[str | None, bool] = (None, False)) -> None:
    rec = run.record
    best = history.best()
    baseline = history.baseline()
    label = baseline.report.label if baseline and baseline.report else ""
    out = [f"# swizzleperf run {rec.run_id}", "",
           f"- kernel: `{rec.kernel.path}` (size `{rec.size}`)",
           f"- hardware: {rec.hardware.name} ({rec.hardware_reason}); {rec.hardware.describe()}",
           f"- profiler: {rec.profiler} ({rec.profiler_reason}); hit rates are {label}",
           f"- proposer: {rec.proposer}, seed {rec.seed}; status: {rec.status} ({rec.status_detail})",
           f"- ranking: {rec.ranking_rule}", ""]
    if baseline and baseline.report and best and best.report:
        out += _best_against_baseline(rec, best, baseline, grouping, advice)
    if rec.usage.calls:
        out += [f"LLM usage: {rec.usage.calls} calls, {rec.usage.prompt_tokens} prompt + "
                f"{rec.usage.completion_tokens} completion tokens" +
                (f", ${rec.usage.cost_usd:.4f}" if rec.usage.cost_usd is not None else ""), ""]
    out += [f"![{name}]({name})" for name in pictures] + [""]
    timed = history.timed()
    times = " median ms | p20-p80 ms | speedup |" if timed else ""
    out += [f"| # | origin | family | L2 read hit % |{times} seconds | verdict |",
            "|---|---|---|---|" + "---|" * (3 if timed else 0) + "---|---|"]
    out += [_row(a, baseline, timed) for a in history.attempts]
    if best is not None:
        out += ["", "## Best remap", "", "```python", best.source.rstrip(), "```", "",
                "Files: `best/remap.py` (the remap alone, importable) and "
                f"`best/{rec.kernel.path.split('/')[-1]}` (the kernel with it applied)."]
    (run.path / "report.md").write_text("\n".join(out) + "\n")


def _best_against_baseline(rec, best, baseline, grouping: str | None, advice: tuple[str | None, bool]) -> list[str]:
    """report.md's summary of the best attempt: its gain, bounds, proof, grouping, time and per-die table."""
    sentence, cannot = advice
    gain = best.report.hit_pct - baseline.report.hit_pct
    headroom = "" if cannot or not headroom_text(best.report, rec.ceiling_pct) else \
        f"; {headroom_text(best.report, rec.ceiling_pct)}"
    out = [f"**Best: `{best.family}` (iteration {best.iteration}) — {ranked_headline(best, baseline)} "
           f"({gain:+.2f} points{headroom}); {ceiling_text(rec.ceiling_pct)}.**", ""]
    if sentence:
        out += [f"{sentence[0].upper()}{sentence[1:]}.", ""]
    if (noise := within_noise(best, baseline)) is not None:
        out += [f"The gain: {noise}. Recommendation: keep the kernel's own order.", ""]
    out += [f"Bounds: {bounds_text(best.report)}.", ""]
    if _bijectivity_data(best).get("proof_text"):
        out += [f"Bijectivity of the best remap: {_bijectivity_data(best)['proof_text']}.", ""]
    needs = achievable_sentence(best.report, rec.hardware.num_domains)
    if needs:
        out += [needs, ""]
    if grouping:
        out += [f"Where the best remap puts programs: {grouping}.", ""]
    if best.report.timing and baseline.report.timing:
        ratio, low, high = speedup(baseline.report.timing, best.report.timing)
        out += [f"Time ({best.report.timing.source} median, L2 {best.report.timing.l2_state}): "
                f"{baseline.report.timing.median_ms:.4f} ms -> {best.report.timing.median_ms:.4f} ms, "
                f"speedup {ratio:.3f}x (p20/p80 range {low:.3f}-{high:.3f}).", ""]
    if best.report.per_domain:
        out += ["| die | accesses | hit % (baseline) | hit % (best) | unique lines (baseline) | unique lines (best) |",
                "|---|---|---|---|---|---|"]
        for b, d in zip(baseline.report.per_domain, best.report.per_domain):
            out.append(f"| {d.domain} | {d.accesses} | {b.hit_pct:.2f} | {d.hit_pct:.2f} | "
                       f"{b.unique_lines} | {d.unique_lines} |")
        out.append("")
    return out


def write_all(run: RunDir, kernel: KernelFile, history: History, achievable: np.ndarray | None = None) -> None:
    """Everything from the history; `achievable` (die per logical program, from the profiler that found the
    bound: it is not on disk) adds the bound's grouping to tiles.png."""
    best = history.best()
    best_ids, grouping = None, None
    if best is not None:
        write_best(run, kernel, best)
        grid = kernel.grid(run.record.size)
        if not kernel.persistent:  # its slots are tiles, not programs: where a slot runs is not the slot order's
            best_ids = logical_ids(kernel.remap_of(best.source), kernel.hook, grid,
                                   hook_constants(kernel, run.record.hardware))
            grouping = grouping_sentence(best_ids, grid, run.record.hardware)
    write_report(run, history, write_pictures(run, kernel, history, best, best_ids, achievable), grouping,
                 size_advice_for(kernel, run.record.size, run.record.hardware))
