"""The LLM proposer end to end through the real client path, against the scripted server."""

import dataclasses
from pathlib import Path

import pytest

from swizzleperf.errors import LLMError
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.proposers.base import ProposalContext
from swizzleperf.proposers.llm.proposer import LLMProposer, family_name, make_llm_proposer
from swizzleperf.proposers.llm.scripted_server import Failure, ScriptedServer, chat_reply, word_count
from swizzleperf.records.proposal import AttemptView, LLMUsage
from swizzleperf.records.report import BottleneckReport, DomainStats
from swizzleperf.remaps.check import normalise, static_check

KERNELS = Path(__file__).resolve().parents[2] / "kernels"

ROW_REMAP = '''@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    # whole rows per XCD: XCD d takes a contiguous range of logical ids
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    q = tl.cdiv(num_pids, NUM_XCDS)
    tall = num_pids - (q - 1) * NUM_XCDS
    if xcd < tall:
        return xcd * q + local
    return tall * q + (xcd - tall) * (q - 1) + local
'''

ANALYSIS = chat_reply(access_pattern="Each program reads its whole row twice and writes one chunk of it.",
                      sharing="The CHUNKS programs of one row read the same row (cols * 4 bytes).")


def proposal_reply(code, approach="My new swizzling approach will remap blocks by giving each XCD whole rows.",
                   critique=None):
    return chat_reply(reasoning="Consecutive ids of one row land on different XCDs.", critique=critique or {},
                      approach=approach, why_better="It will be better than any prior implementation because every "
                                                    "row is fetched by one XCD only.", code=code)


@pytest.fixture(scope="module")
def kernel():
    return load_kernel(KERNELS / "softmax.py")


@pytest.fixture(autouse=True)
def no_openai_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def context(kernel, history=(), iteration=1, seen=frozenset()):
    per = [DomainStats(domain=d, programs=2048, accesses=500_000, hits=200_000, unique_lines=262_144)
           for d in range(8)]
    report = BottleneckReport(source="sim", hardware="mi300x", kernel="softmax", size="medium", hit_pct=40.0,
                              ceiling_pct=96.88, accesses=4_000_000, hits=1_600_000, unique_lines=262_144,
                              per_domain=per)
    return ProposalContext(kernel=kernel, hardware=PRESETS["mi300x"], baseline=report, history=list(history),
                           iteration=iteration, seen_sources=seen)


def proposer_for(server, mode="aware", **options):
    return make_llm_proposer("openai/scripted-model", api_base=server.base_url, mode=mode, **options)


def test_a_good_remap_becomes_a_proposal_with_both_calls_counted(kernel):
    reply = proposal_reply(f"```python\n{ROW_REMAP}```")
    with ScriptedServer([ANALYSIS, reply]) as server:
        proposal = proposer_for(server).propose(context(kernel))
    assert proposal.source == ROW_REMAP and proposal.extraction_error is None
    static_check(proposal.source, kernel.hook)
    assert proposal.origin == "llm" and proposal.family == "llm:giving-each-xcd-whole-rows"
    assert proposal.rationale.startswith("My new swizzling approach will remap blocks by giving each XCD whole rows.\n"
                                         "It will be better than any prior implementation because")
    analysis_request, propose_request = server.requests
    assert proposal.usage == LLMUsage(
        calls=2, prompt_tokens=word_count(analysis_request.text) + word_count(propose_request.text),
        completion_tokens=word_count(ANALYSIS) + word_count(reply))
    # what the codegen call was shown
    shown = propose_request.text
    assert "Access pattern: Each program reads its whole row twice" in shown  # the memory analysis
    assert "There are 8 XCDs" in shown and "program id w runs on XCD w % 8" in shown  # curated hardware
    assert "fetched by 8.00 XCDs" in shown  # the per-die profile
    assert "tiny: 15 programs, small: 256 programs, medium: 16,384 programs" in shown  # the rules' grid sizes
    assert "No attempts yet" in shown
    assert kernel.source.strip() in shown  # the original code


def test_the_memory_analysis_runs_once_and_the_history_reaches_the_model(kernel):
    rejected = AttemptView(iteration=1, origin="llm", family="llm:x", diff="-    return pid\n+    return pid * 2",
                           accepted=False, stage="bijectivity", reason="logical id 16 is out of range at grid 15")
    with ScriptedServer([ANALYSIS, proposal_reply(f"```python\n{ROW_REMAP.replace('return pid', 'return 0')}```"),
                         proposal_reply(f"```python\n{ROW_REMAP}```",
                                        critique={"iteration 1": "not a bijection because ..."})]) as server:
        proposer = proposer_for(server)
        proposer.propose(context(kernel))
        second = proposer.propose(context(kernel, history=[rejected], iteration=2))
    assert len(server.requests) == 3  # analysis, propose, propose
    assert second.usage.calls == 1
    shown = server.requests[2].text
    assert "### iteration 1 (llm, llm:x)\nOutcome: REJECTED at bijectivity: logical id 16 is out of range" in shown
    assert "Do not repeat any of these implementations." in shown
    assert "Critique of earlier attempts:\niteration 1: not a bijection because ..." in second.rationale


def test_a_changed_kernel_gets_a_new_memory_analysis(kernel):
    edited = dataclasses.replace(kernel, source=kernel.source + "\n# edited\n")
    with ScriptedServer([ANALYSIS, proposal_reply(ROW_REMAP), ANALYSIS, proposal_reply(ROW_REMAP)]) as server:
        proposer = proposer_for(server)
        proposer.propose(context(kernel))
        assert proposer.propose(context(edited)).usage.calls == 2
    assert len(server.requests) == 4


def test_a_chatty_reply_outside_the_field_format_still_yields_the_code(kernel):
    chatty = f"Sure! The chunks of a row should share an XCD. Here you go:\n\n```python\n{ROW_REMAP}```\nHope it helps."
    with ScriptedServer([ANALYSIS, chatty]) as server:
        proposal = proposer_for(server).propose(context(kernel))
    assert proposal.source == ROW_REMAP and proposal.extraction_error is None
    assert proposal.family == "llm:iteration-1"
    assert "did not follow the field format exactly (missing field(s) reasoning, critique, approach, why_better, " \
           "code)" in proposal.rationale
    assert len(server.requests) == 2  # no hidden retry in another format


def test_a_reply_without_code_is_a_proposal_with_the_reason(kernel):
    with ScriptedServer([ANALYSIS, proposal_reply("I would keep the original remap; it is already optimal.")]) as server:
        proposal = proposer_for(server).propose(context(kernel))
    assert proposal.source == ""
    assert proposal.extraction_error.startswith("no Python function was found in the answer. Answer with the "
                                                "complete remap function `@triton.jit def swizzle(pid, num_pids, "
                                                "NUM_XCDS: tl.constexpr)`")
    assert proposal.usage.calls == 2  # the failed answer still cost tokens


def test_a_wrong_signature_is_reported_not_guessed(kernel):
    code = "```python\n@triton.jit\ndef swizzle(pid, NUM_XCDS: tl.constexpr):\n    return pid\n```"
    with ScriptedServer([ANALYSIS, proposal_reply(code)]) as server:
        proposal = proposer_for(server).propose(context(kernel))
    assert proposal.source == "" and "the remap function takes (pid, NUM_XCDS)" in proposal.extraction_error


def test_a_repeated_implementation_is_refused_with_a_reason(kernel):
    seen = frozenset({normalise(ROW_REMAP)})
    reformatted = ROW_REMAP.replace("    # whole rows per XCD: XCD d takes a contiguous range of logical ids\n", "")
    with ScriptedServer([ANALYSIS, proposal_reply(f"```python\n{reformatted}```")]) as server:
        proposal = proposer_for(server).propose(context(kernel, seen=seen))
    assert "same implementation as an earlier attempt" in proposal.extraction_error
    assert proposal.source == reformatted  # kept, so the history can show what was repeated


def test_a_server_error_is_retried_inside_propose(kernel):
    with ScriptedServer([ANALYSIS, Failure(500), proposal_reply(ROW_REMAP)]) as server:
        proposer = proposer_for(server)
        proposer.client.backoff_s = 0.01
        assert proposer.propose(context(kernel)).source == ROW_REMAP
    assert len(server.requests) == 3


def test_tokens_of_a_call_before_a_failure_go_on_the_next_proposal(kernel):
    with ScriptedServer([ANALYSIS, Failure(400, "bad request"), proposal_reply(ROW_REMAP)]) as server:
        proposer = proposer_for(server)
        with pytest.raises(LLMError, match="refused the request"):
            proposer.propose(context(kernel))
        proposal = proposer.propose(context(kernel))
    assert len(server.requests) == 3  # the analysis is not asked for again
    assert proposal.usage.calls == 2
    assert proposal.usage.completion_tokens == word_count(ANALYSIS) + word_count(proposal_reply(ROW_REMAP))


def test_an_unusable_server_raises_llm_error_from_propose(kernel):
    with ScriptedServer([Failure(401, "invalid api key")]) as server:
        with pytest.raises(LLMError, match="rejected the credentials"):
            proposer_for(server).propose(context(kernel))


def test_unaware_mode_sends_no_hardware(kernel):
    with ScriptedServer([ANALYSIS, proposal_reply(ROW_REMAP)]) as server:
        proposer_for(server, mode="unaware").propose(context(kernel))
    for request in server.requests:
        assert "[[ ## hardware ## ]]\nNot provided." in request.text
        outside_kernel = request.text.replace(kernel.source, "")  # the kernel file's own comments are its author's
        assert "XCDs" not in outside_kernel and "round-robin" not in outside_kernel and "38 CUs" not in outside_kernel


def test_overload_mode_sends_the_long_architecture_text(kernel):
    with ScriptedServer([ANALYSIS, proposal_reply(ROW_REMAP)]) as server:  # it needs more than the default window
        proposer_for(server, mode="overload", context_tokens=32_768).propose(context(kernel))
    shown = server.requests[1].text
    assert "GPU ARCHITECTURE REFERENCE: AMD INSTINCT MI300X" in shown and "Per XCD:" not in shown
    assert word_count(shown) > word_count(server.requests[1].text.split("[[ ## hardware ## ]]")[0]) + 3000


def test_family_names_come_from_the_approach_sentence():
    assert family_name("My new swizzling approach will remap blocks by grouping all chunks of a row onto one XCD", 3) \
        == "llm:grouping-all-chunks-of-a-row"
    assert family_name("", 5) == "llm:iteration-5"


def test_the_proposer_can_wrap_any_client(kernel):
    from dspy.utils.dummies import DummyLM

    from swizzleperf.proposers.llm.client import ModelClient

    lm = DummyLM([{"access_pattern": "rows", "sharing": "chunks of a row"},
                  {"reasoning": "r", "critique": {}, "approach": "", "why_better": "", "code": ROW_REMAP}])
    proposal = LLMProposer(ModelClient(lm), mode="aware").propose(context(kernel))
    assert proposal.source == ROW_REMAP and proposal.usage.calls == 2


def test_the_model_is_told_the_residency_the_kernel_allows(kernel, tmp_path):
    """A kernel declaring PROGRAMS_PER_CU = 1 is described as 38 programs per XCD, not the preset's 76."""
    path = tmp_path / "softmax.py"
    path.write_text(kernel.source + "\nPROGRAMS_PER_CU = 1\n")
    one_per_cu = load_kernel(path)
    with ScriptedServer([ANALYSIS, proposal_reply(f"```python\n{ROW_REMAP}```")] * 2) as server:
        proposer_for(server).propose(context(kernel))
        proposer_for(server).propose(context(one_per_cu))
    preset, declared = server.requests[1].text, server.requests[3].text
    assert "Each XCD runs about 76 programs at once (38 CUs x 2 each)" in preset
    assert "Each XCD runs about 38 programs at once (38 CUs x 1 each)" in declared


def test_the_profile_shown_names_whose_it_is(kernel):
    """The model is shown the best remap's profile once one beats the original, and told so (issue 14)."""
    base = context(kernel)
    better = base.baseline.model_copy(update={"hit_pct": 80.0})
    with ScriptedServer([ANALYSIS, proposal_reply(ROW_REMAP), proposal_reply(ROW_REMAP)]) as server:
        proposer = proposer_for(server)
        proposer.propose(base)
        proposer.propose(dataclasses.replace(base, best=better, iteration=2))
    first, second = server.requests[1].text, server.requests[2].text
    assert "Profile of the original kernel at size medium" in first and "rate 40.00%" in first
    assert "Profile of the best remap so far at size medium" in second and "rate 80.00%" in second
    assert "Profile of the original kernel" not in second
