"""One candidate through the stages: parsed once in this process, and handed down as a value."""

from __future__ import annotations

from pathlib import Path

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.records.proposal import Proposal
from swizzleperf.remaps.families import xcd_chunked
from swizzleperf.untrusted import parse as untrusted

ROOT = Path(__file__).resolve().parents[2]


def test_a_candidate_is_parsed_once_in_this_process_per_evaluation(monkeypatch):
    kernel = load_kernel(ROOT / "kernels" / "softmax.py")
    source = xcd_chunked(kernel.hook, chunk=4)
    parsed: list[str] = []
    real = untrusted.parse

    def counting(text, *args, **kwargs):
        parsed.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(untrusted, "parse", counting)
    evaluator = CandidateEvaluator(kernel, PRESETS["mi300x"], None, "small", correctness_sizes=["tiny"])
    attempt = evaluator.evaluate(Proposal(source=source, family="xcd_chunked(chunk=4)", origin="search"), 1)
    # static, bijectivity (sampled and proven in children) and correctness (in a child) all passed ...
    assert [s.stage for s in attempt.stages if s.ok] == ["propose", "static", "bijectivity", "correctness"]
    # ... and of them only the static check parsed the text here: the others read its tree
    assert parsed == [source]


def test_a_static_rejection_stops_before_any_child(monkeypatch):
    kernel = load_kernel(ROOT / "kernels" / "softmax.py")
    evaluator = CandidateEvaluator(kernel, PRESETS["mi300x"], None, "small", correctness_sizes=["tiny"])
    bad = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return abs(pid)\n"
    attempt = evaluator.evaluate(Proposal(source=bad, family="abs", origin="search"), 1)
    assert attempt.verdict == "rejected at static" and "use tl.abs()" in attempt.failure.detail
    assert [s.stage for s in attempt.stages] == ["propose", "static"]
