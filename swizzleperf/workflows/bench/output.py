"""bench.md, bench.json and bench.png (the table a terminal shows is cli/bench_command.py's)."""

from __future__ import annotations

from pathlib import Path

from swizzleperf.loop.history import RANKING_SHORT, gain_noise
from swizzleperf.records.report import RUN_TO_RUN_PTS, Source
from swizzleperf.workflows.bench.results import BenchReport, KernelResult, misses_cell

# --- output -----------------------------------------------------------------------------------------

COLUMNS = ("kernel", "size", "source", "read misses (x own)", "baseline hit %", "best hit %", "ceiling %", "improvement (pts)", "speedup",
           "iterations to best", "s to best", "best family", "other sizes: baseline -> best hit % (ceiling)")


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _source_text(source: Source | None) -> str:
    return "" if source is None else "sim (predicted)" if source == "sim" else f"{source} (measured)"


def row_cells(result: KernelResult, separator: str) -> list[str]:
    """One table row, in COLUMNS order; `separator` joins the other sizes (a line break)."""
    if result.status == "failed":
        return [result.kernel, "", "", "", "", "", "", "", "", "", "", f"failed: {result.error}", ""]
    ceiling = _pct(result.ceiling_pct) if result.ceiling_pct is not None else "n/a (counters)"
    noisy = gain_noise(result.source, result.improvement_pts) is not None
    gain = f"{result.improvement_pts:+.2f}" + (" (within noise)" if noisy else "")
    speedup = result.speedup.cell() if result.speedup else "n/a (not timed)"
    return [result.kernel, result.size or "", _source_text(result.source), misses_cell(result.misses_ratio),
            _pct(result.baseline_hit_pct),
            _pct(result.best_hit_pct), ceiling, gain, speedup, str(result.best_iteration),
            f"{result.seconds_to_best:.1f}", result.best_family or "",
            separator.join(s.cell() for s in result.other_sizes) or "(no other sizes)"]


def _header(report: BenchReport) -> str:
    hw = report.hardware
    return (f"L2 read hit rates {report.label} on {hw.name} ({report.hardware_reason}; profiler: "
            f"{report.profiler_reason}). Proposer {report.proposer}, {report.iterations} iterations per kernel, "
            f"seed {report.seed}; {RANKING_SHORT}. Other sizes: the best remap re-validated (bijectivity on "
            f"that size's grid, correctness on {report.correctness_device}) and re-profiled beside the kernel's own "
            f"remap; the simulator takes sizes up to {report.max_sim_accesses / 1e6:g} M line accesses (exact when "
            f"cached, else estimated from the run's accesses per program) with a "
            f"{report.capture_timeout_s:g} s capture time box. "
            + ("" if report.other_sizes is None else "No other sizes were asked for. " if not report.other_sizes
               else f"Other sizes limited to {', '.join(report.other_sizes)}. ")
            + (f"An improvement marked (within noise) is smaller than the {report.profiler} run-to-run movement of "
               f"one remap's read hit rate ({RUN_TO_RUN_PTS[report.profiler]} points): not a measured one. "
               if report.profiler in RUN_TO_RUN_PTS else "")
            + ("" if report.complete else f"PARTIAL: {len(report.kernels)} of {report.kernels_planned} kernels "
                                          f"finished so far. ")
            + f"Total wall time {report.total_seconds:.1f} s ({report.total_seconds / 60:.1f} min).")


def to_markdown(report: BenchReport) -> str:
    escape_md = lambda text: text.replace("|", "\\|")  # noqa: E731
    lines = [f"# swizzleperf bench on {report.hardware.name}", "", _header(report), "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(escape_md(c) for c in row_cells(k, "<br>")) + " |" for k in report.kernels]
    lines += ["", "![baseline, best and ceiling per kernel](bench.png)", ""]
    return "\n".join(lines)


SHORT_COLUMNS = ("kernel", "size", "source", "misses", "base %", "best %", "ceiling %", "+pts", "speedup", "iter", "s",
                  "best family", "other sizes: base -> best % (ceiling)")


def plot_bench(report: BenchReport, path: Path) -> Path:
    """Baseline, best and ceiling per kernel, as grouped bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [k for k in report.kernels if k.status == "finished"]
    x = np.arange(len(rows))
    width = 0.27
    fig, ax = plt.subplots(figsize=(max(6.0, 1.0 * len(rows) + 2.0), 4.4), dpi=110)
    for offset, values, colour, label in (
            (-width, [k.baseline_hit_pct for k in rows], "#888888", "baseline (kernel's own remap)"),
            (0.0, [k.best_hit_pct for k in rows], "#1f77b4", "best remap"),
            (width, [k.ceiling_pct for k in rows], "#2ca02c", "ceiling")):
        bars = ax.bar(x + offset, [v or 0.0 for v in values], width, color=colour, label=label)
        ax.bar_label(bars, labels=["n/a" if v is None else f"{v:.0f}" for v in values], fontsize=6, padding=1)
    ax.set_xticks(x, [f"{k.kernel}\n({k.size})" for k in rows], fontsize=8)
    ax.set_ylim(0, 112)  # room for the legend above 100 %
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel(f"L2 read hit rate, % ({report.label})", fontsize=9)
    ax.set_title(f"swizzleperf bench on {report.hardware.name}: {report.proposer}, {report.iterations} iterations "
                 f"per kernel, {report.total_seconds / 60:.1f} min", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", ncols=3, frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_outputs(report: BenchReport, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    markdown, data = out / "bench.md", out / "bench.json"
    markdown.write_text(to_markdown(report))
    data.write_text(report.model_dump_json(indent=2) + "\n")
    return [markdown, data, plot_bench(report, out / "bench.png")]
