"""The LLM loop with a real local model: gemma-3 270M on llama.cpp (llama-cpp-python), on this machine.

    .venv/bin/python benchmarks/bench_local_llm.py [--proposals 20] [--n-ctx 4096] [--max-tokens 256]

Starts `python -m llama_cpp.server` with the model on a free loopback port (swizzleperf.lab.local_llm;
`./setup.sh --local-llm` installs both), runs `swizzleperf optimize kernels/softmax.py` with the LLM
proposer for --proposals iterations (patience and the ceiling off, so every iteration asks the model),
and prints, from the run's records:

- seconds per call, and the prompt and answer tokens the server counted, per kind of call;
- the prompt's tokens by part (each input field, measured with the server's tokenizer, and the
  instructions and field markers DSPy adds), and how far the measurement before the call was from the
  server's count;
- the share of answers that followed the field format, were cut at max_tokens, and passed each stage.

The run directory is kept (its path is printed). The machine may be shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from rich.console import Console
from rich.table import Table

from swizzleperf.lab.local_llm import LocalModelServer, missing
from swizzleperf.records.attempt import STAGES, Attempt
from swizzleperf.workflows.optimize import OptimizeRequest, run_quietly

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--proposals", type=int, default=20, help="LLM iterations (calls: one more, the analysis)")
    parser.add_argument("--n-ctx", type=int, default=4096, help="the server's context window (--context-tokens)")
    parser.add_argument("--max-tokens", type=int, default=256, help="answer tokens per call")
    parser.add_argument("--kernel", default="softmax")
    args = parser.parse_args()
    if why := missing():
        raise SystemExit(f"bench_local_llm: {why}")
    out = Console(width=160)
    runs = Path(tempfile.mkdtemp(prefix="bench-local-llm-"))
    started = time.monotonic()
    with LocalModelServer(n_ctx=args.n_ctx, log=runs / "server.log") as server:
        request = OptimizeRequest(kernel_path=ROOT / "kernels" / f"{args.kernel}.py", hardware="mi300x",
                                  proposer="llm", model=server.model, api_base=server.base_url,
                                  iterations=args.proposals, patience=args.proposals + 1, stop_at_ceiling=False,
                                  context_tokens=args.n_ctx, max_tokens=args.max_tokens, llm_timeout=600,
                                  runs_dir=runs, workers=1)
        run = run_quietly(request)
    attempts = [a for a in run.load_history().attempts if a.origin == "llm"]
    out.print(f"{args.kernel} with {server.model} (llama-cpp-python {version('llama-cpp-python')}, n_ctx "
              f"{args.n_ctx}, max_tokens {args.max_tokens}) on {platform.processor() or platform.machine()}, "
              f"{len(os.sched_getaffinity(0))} cores; load average {os.getloadavg()[0]:.2f}; "
              f"{time.monotonic() - started:.0f} s in all; run {run.path}")
    out.print(calls_table(attempts))
    out.print(parts_table(attempts))
    out.print(stages_table(attempts))


def _calls(attempts: list[Attempt]):
    return [call for a in attempts for call in a.llm_calls]


def calls_table(attempts: list[Attempt]) -> Table:
    table = Table(title="calls (tokens as the server counted them)", title_justify="left")
    for col in ("call", "n", "timed out", "s median", "s min", "s max", "prompt tokens median",
                "answer tokens median", "cut at max_tokens"):
        table.add_column(col, justify="left" if col == "call" else "right")
    for kind in ("memory analysis", "proposal"):
        calls = [c for c in _calls(attempts) if c.call == kind]
        answered = [c for c in calls if c.outcome == "answered"]
        if not answered:
            continue
        seconds = [c.seconds for c in answered]
        table.add_row(kind, str(len(calls)), str(len(calls) - len(answered)), f"{statistics.median(seconds):.1f}",
                      f"{min(seconds):.1f}", f"{max(seconds):.1f}",
                      f"{statistics.median(c.prompt_tokens for c in answered):,.0f}",
                      f"{statistics.median(c.completion_tokens for c in answered):,.0f}",
                      f"{sum(c.finish_reason == 'length' for c in answered)}/{len(answered)}")
    return table


def parts_table(attempts: list[Attempt]) -> Table:
    table = Table(title="prompt tokens by part, mean over the calls (the server's tokenizer; instructions: the "
                        "field descriptions and markers DSPy adds, and the chat template)", title_justify="left")
    for col in ("call", "part", "tokens", "share"):
        table.add_column(col, justify="left" if col in ("call", "part") else "right")
    for kind in ("memory analysis", "proposal"):
        calls = [c for c in _calls(attempts) if c.call == kind and c.outcome == "answered"]
        if not calls:
            continue
        whole = statistics.mean(c.prompt_measured for c in calls)
        parts = {name: statistics.mean(c.parts.get(name, 0) for c in calls) for name in calls[0].parts}
        parts["instructions"] = whole - sum(parts.values())
        for name, tokens in parts.items():
            table.add_row(kind, name, f"{tokens:,.0f}", f"{tokens / whole:.0%}")
        table.add_row(kind, "whole prompt, measured before the call", f"{whole:,.0f}", "100%")
        table.add_row(kind, "measured minus the server's count (mean, max)",
                      f"{statistics.mean(c.prompt_measured - c.prompt_tokens for c in calls):+.1f}",
                      f"{max(c.prompt_measured - c.prompt_tokens for c in calls):+d}")
        for what in ("history entries", "the memory analysis", "the kernel source"):
            cut = sum(any(what in item for item in c.left_out) for c in calls)
            table.add_row(kind, f"calls that left out {what}", f"{cut}/{len(calls)}", "")
    return table


def stages_table(attempts: list[Attempt]) -> Table:
    n = len(attempts)
    table = Table(title=f"the {n} answers", title_justify="left")
    table.add_column("what", justify="left")
    table.add_column("answers", justify="right")
    table.add_column("share", justify="right")
    formatted = sum("did not follow the field format" not in a.rationale for a in attempts)
    cut = sum("The answer was cut at max_tokens" in a.rationale for a in attempts)
    rows = [("followed the field format", formatted), ("cut at max_tokens", cut)]
    rows += [(f"passed {stage}", sum(any(s.stage == stage and s.ok for s in a.stages) for a in attempts))
             for stage in STAGES]
    for what, count in rows:
        table.add_row(what, f"{count}/{n}", f"{count / n:.0%}" if n else "-")
    reasons = {}
    for a in attempts:
        if a.failure is not None:
            key = f"{a.failure.stage}: {a.failure.detail.split('.')[0][:90]}"
            reasons[key] = reasons.get(key, 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
        table.add_row(f"rejected at {reason}", f"{count}/{n}", f"{count / n:.0%}")
    return table


if __name__ == "__main__":
    main()
