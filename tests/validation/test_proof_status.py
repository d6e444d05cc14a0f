"""What the bijectivity stage says beyond the sampled grids (swizzleperf.validation.proof_status), with and
without z3: the sentence check prints and attempts record, the docstring line of best/remap.py,
and the row tag of report.md."""

from __future__ import annotations

import pytest

from swizzleperf.kernel.contract import HookSignature
from swizzleperf.validation import proof_status
from swizzleperf.validation.bijectivity import check_bijective
from swizzleperf.validation.proofs.entry import Counterexample, ProofVerdict

H1 = HookSignature("swizzle", "pid", ("num_pids",), ("NUM_XCDS",))
IDENTITY = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return pid\n"
BASE = dict(hook=H1.render(), die_counts=[1, 2, 4, 8, 16], time_limit_s=2.0, seconds=0.1)
PROVEN = ProofVerdict(status="proven", proven_die_counts=[1, 2, 4, 8, 16], **BASE)
TIMEOUT = ProofVerdict(status="unknown", unknown_kind="timeout", reason="z3 could not decide X", **BASE)
LIMITED = ProofVerdict(status="unknown", unknown_kind="overflow", reason="line 6 wraps", proven_max_programs=1023,
                       **BASE)
REFUTED = ProofVerdict(status="counterexample", **BASE, counterexample=Counterexample(
    kind="collision", grid=(9,), constexprs={"NUM_XCDS": 2}, programs=[0, 1], logical=(0,), message="grid (9,): x"))


@pytest.mark.parametrize("verdict, sentence, line, tag", [
    (PROVEN, "proven bijective for all grid sizes (z3: every grid of up to 2,147,483,647 programs, die counts 1, 2, "
             "4, 8, 16)", "Proven bijective for all grid sizes (z3), die counts 1, 2, 4, 8, 16.",
     "proven for all grid sizes (z3)"),
    (TIMEOUT, "not proven for all grid sizes within the time budget (z3 could not decide X); tested on 3 grids",
     "Tested bijective on grids: 7, 2x3 (not proven for all grid sizes within the time budget).",
     "not proven for all grid sizes; tested on 2 grids"),
    (LIMITED, "proven bijective for every grid of up to 1,023 programs (z3); on larger grids an int32 intermediate "
              "wraps: line 6 wraps", "Proven bijective for every grid of up to 1,023 programs (z3); an int32 "
                                     "intermediate wraps on larger grids.",
     "proven for grids of up to 1,023 programs (z3; int32 wraps beyond)"),
    (None, "tested on 3 grids; install swizzleperf[proofs] to prove for all grid sizes",
     "Tested bijective on grids: 7, 2x3 (install swizzleperf[proofs] to prove for all grid sizes).",
     "tested on 2 grids (no z3)"),
])
def test_each_verdict_in_a_sentence_a_docstring_line_and_a_report_tag(verdict, sentence, line, tag):
    recorded = verdict.model_dump(mode="json") if verdict else None
    assert proof_status.proof_sentence(verdict, 3) == sentence
    assert proof_status.docstring_line(recorded, [[7], [2, 3]]) == line
    assert proof_status.proof_tag({"proof": recorded, "grids": [[7], [2, 3]], "proof_text": sentence}) == tag


def test_a_hook_proven_in_parts_says_how_it_was_cut():
    halves = PROVEN.model_copy(update={"method": "in two halves through `lid`: the order (0.20 s), the raster (0.05 s)"})
    assert proof_status.proof_sentence(halves, 3) == (
        "proven bijective for all grid sizes (z3: every grid of up to 2,147,483,647 programs, die counts 1, 2, 4, 8, "
        "16; in two halves through `lid`)")


def test_a_counterexample_is_its_own_message():
    assert proof_status.proof_sentence(REFUTED, 3) == "not a bijection: grid (9,): x"


def test_records_from_before_the_prover_keep_their_old_line():
    assert proof_status.docstring_line(None, [[7]], asked=False) == "Proven bijective on grids: 7."
    assert proof_status.proof_tag({"grids": [[7]]}) == "tested on 1 grids"


def test_without_z3_the_sampled_check_still_runs_and_says_how_to_prove(monkeypatch):
    monkeypatch.setattr(proof_status, "z3_installed", lambda: False)
    report = check_bijective(IDENTITY, H1, [(5,), (64,)], {"NUM_XCDS": 8}, isolate=False)
    assert report.ok and report.proof is None
    assert report.message == ("bijective on all 2 grids ((5,), (64,)); tested on 2 grids; install swizzleperf[proofs] "
                              "to prove for all grid sizes")


def test_the_die_counts_proven_are_the_presets_and_the_runs_own():
    assert proof_status.proof_die_counts({"NUM_XCDS": 8}) == [1, 2, 4, 8, 16]
    assert proof_status.proof_die_counts({"NUM_XCDS": 6}) == [1, 2, 4, 6, 8, 16]


def test_a_hook_proven_by_cases_says_where_it_was_split():
    cases = PROVEN.model_copy(update={"method": "by cases on `pid < full`, each side mapped onto itself"})
    assert proof_status.proof_sentence(cases, 3).endswith("16; by cases on `pid < full`, each side mapped onto itself)")


def test_a_part_proven_by_cases_is_named_after_the_cut():
    method = ("in two halves through `lid`: the order as a 1D hook of the program count (1.89 s, by cases on "
              "`pid < rounds_end`, each side mapped onto itself), the raster on the grid (0.06 s)")
    sentence = proof_status.proof_sentence(PROVEN.model_copy(update={"method": method}), 3)
    assert sentence.endswith("16; in two halves through `lid`, the order by cases on `pid < rounds_end`)")
    assert " s," not in sentence  # no timings: the sentence is the same on every machine


@pytest.mark.parametrize("verdict, needed, reason", [
    (PROVEN, 2 ** 31 - 1, None),
    (LIMITED, 1000, None),  # proven up to 1,023 programs: covers a kernel whose largest grid has 1,000
    (LIMITED, 2048, "proven only for grids of up to 1,023 programs, fewer than the kernel's largest declared grid "
                    "(2,048)"),
    (TIMEOUT, 16, "not proven for every grid within the time budget (z3 could not decide X)"),
    (None, 16, "nothing beyond the sampled grids is proven: "),
])
def test_a_proof_is_enough_only_when_it_covers_the_kernels_declared_grids(verdict, needed, reason):
    said = proof_status.unproven_reason(verdict, needed)
    assert said == reason if reason is None or verdict is not None else said.startswith(reason)


@pytest.mark.parametrize("allow", [False, True])
def test_an_unproven_remap_needs_allow_unproven_and_is_marked_so(monkeypatch, allow):
    from pathlib import Path

    from swizzleperf.hardware.presets import PRESETS
    from swizzleperf.kernel.contract import load_kernel
    from swizzleperf.loop.pipeline import CandidateEvaluator
    from swizzleperf.records.proposal import Proposal

    kernel = load_kernel(Path(__file__).resolve().parents[2] / "kernels" / "softmax.py")
    monkeypatch.setattr(proof_status, "prove_remap", lambda *args, **kwargs: TIMEOUT)  # z3 could not decide
    evaluator = CandidateEvaluator(kernel, PRESETS["mi300x"], None, kernel.default_size, allow_unproven=allow)
    reversed_order = IDENTITY.replace("return pid", "return num_pids - 1 - pid")
    attempt = evaluator.evaluate(Proposal(source=reversed_order, family="reversed", origin="search"), 1,
                                 until="bijectivity")
    stage = attempt.stages[-1]
    assert stage.stage == "bijectivity" and stage.ok is allow
    if allow:
        assert stage.detail.startswith("UNPROVEN, accepted with --allow-unproven: not proven for every grid within "
                                       "the time budget (z3 could not decide X); bijective on all ")
    else:
        assert stage.detail.startswith("not proven for every grid within the time budget (z3 could not decide X); "
                                       "--allow-unproven accepts it on its sampled grids (bijective on all ")
    own = evaluator.evaluate(Proposal(source=kernel.hook_source, family="own", origin="baseline"), 0,
                             until="bijectivity")
    assert own.stages[-1].ok and "UNPROVEN" not in own.stages[-1].detail  # the kernel's own hook is as it is
