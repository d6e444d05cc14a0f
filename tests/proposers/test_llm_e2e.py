"""The LLM proposer end to end: the real `swizzleperf optimize` command in a child process, talking
to the scripted OpenAI-compatible server over HTTP (DSPy, LiteLLM and the openai client included).

One scripted run is shared by the tests that read it: every kind of answer a model gives (a
good remap, the whole kernel file in a fence, code inside chatter, a non-bijective remap, no
code, an HTTP 500, no answer in time) must end up in attempts.jsonl and run.json exactly as
described here. Each accepted attempt costs a few seconds of correctness checking in a child.
"""

import re
from pathlib import Path

import pytest
from llm_runs import failure, read_run, small_softmax, swizzleperf

from swizzleperf.errors import LLMError
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.proposers.base import ProposalContext
from swizzleperf.proposers.llm.proposer import make_llm_proposer
from swizzleperf.proposers.llm.scripted_server import Failure, Reply, ScriptedServer, chat_reply, word_count
from swizzleperf.records.proposal import LLMUsage
from swizzleperf.records.report import BottleneckReport

TIMEOUT_S = 2  # --llm-timeout of the scripted runs; a reply delayed past it never arrives
RETRIES = 1  # --llm-retries: one retry, so the HTTP 500 is retried once
# The scripted server does not say its window; these runs are about what the model is shown and what is
# recorded, not the context budget (test_llm_budget.py), so they name one that holds every prompt whole.
WINDOW = 32_768

ROW_REMAP = '''@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    # whole rows per XCD: XCD d takes one contiguous range of logical ids
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    q = tl.cdiv(num_pids, NUM_XCDS)
    tall = num_pids - (q - 1) * NUM_XCDS
    if xcd < tall:
        return xcd * q + local
    return tall * q + (xcd - tall) * (q - 1) + local
'''
# The same implementation written again with other comments and spacing: a repeat.
ROW_REMAP_AGAIN = '''@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    """Contiguous logical ranges per die."""
    xcd = pid % NUM_XCDS
    local = pid // NUM_XCDS
    q = tl.cdiv(num_pids, NUM_XCDS)
    tall = num_pids - (q - 1) * NUM_XCDS
    if xcd < tall:
        return xcd * q + local
    return tall * q + (xcd - tall) * (q - 1) + local
'''
CALLS_PROGRAM_ID = '''@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    rows = num_pids // 4
    return (tl.program_id(0) % rows) * 4 + pid // rows
'''
NAIVE = '''@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    return (pid % NUM_XCDS) * (num_pids // NUM_XCDS) + pid // NUM_XCDS
'''
# Chunked XCD-contiguous with 2 ids per die per round, in the model's own words.
PAIRS = '''@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    # two neighbouring chunks per XCD turn; a ragged tail stays in place
    span = 2 * NUM_XCDS
    whole = (num_pids // span) * span
    if pid >= whole:
        return pid
    turn = pid // span
    die = pid % NUM_XCDS
    second = (pid // NUM_XCDS) % 2
    return turn * span + 2 * die + second
'''

ANALYSIS_TEXT = "Each program reads its whole row twice and writes one chunk of it."
ANALYSIS = chat_reply(access_pattern=ANALYSIS_TEXT,
                      sharing="The CHUNKS programs of one row read the same row (cols * 4 bytes).")


def proposal(code: str, approach: str = "giving each XCD whole rows") -> str:
    return chat_reply(reasoning="Consecutive ids of one row land on different XCDs.", critique={},
                      approach=f"My new swizzling approach will remap blocks by {approach}.",
                      why_better="It will be better than any prior implementation because each row is read by "
                                 "one XCD only.", code=code)


def fenced(code: str) -> str:
    return f"```python\n{code}```"


def with_hook(kernel_text: str, hook: str) -> str:
    """The kernel file with its remap function replaced: what a model sends back as 'the whole file'."""
    start = kernel_text.index("@triton.jit\ndef swizzle(")
    end = kernel_text.index("\n\n\n", start)
    return kernel_text[:start] + hook.rstrip("\n") + kernel_text[end:]


def optimize(kernel: Path, work: Path, proposer: str, server: ScriptedServer, iterations: int):
    return swizzleperf(["optimize", str(kernel), "--hardware", "mi300x", "--no-library", "--keep-going", "--proposer", proposer,
                        "--model", "openai/scripted", "--api-base", server.base_url, "-n", str(iterations),
                        "--llm-timeout", str(TIMEOUT_S), "--llm-retries", str(RETRIES),
                        "--context-tokens", str(WINDOW), "--runs-dir", str(work / "runs")], work)


# --- one scripted LLM run, read by several tests -------------------------------------------------

WHOLE_FILE_PREAMBLE = "Here is the complete updated kernel file:\n\n"
CHATTY = ("Sure! Looking at the profile, the chunks of a row are spread over XCDs. Here is my remap:\n\n"
          f"{CALLS_PROGRAM_ID}\n"
          "This keeps the four chunks of each row together. Let me know if you want another variant!")
NO_CODE = "I would keep the original remap; it is already optimal for this kernel."


@pytest.fixture(scope="module")
def llm_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("llm_e2e")
    kernel = small_softmax(work)
    script = [
        ANALYSIS,                                                            # memory analysis, once
        Failure(500, "scripted overload"), proposal(fenced(ROW_REMAP)),      # 1: retried, then accepted
        WHOLE_FILE_PREAMBLE + fenced(with_hook(kernel.read_text(), ROW_REMAP_AGAIN)),  # 2: a repeat
        CHATTY,                                                              # 3: code in prose, static
        proposal(fenced(NAIVE), "splitting ids into equal ranges"),          # 4: not a bijection
        proposal(NO_CODE, "keeping the original order"),                     # 5: no code
        Reply(proposal(fenced(PAIRS)), delay_s=TIMEOUT_S + 4),               # 6: no answer in time,
        Reply(proposal(fenced(PAIRS)), delay_s=TIMEOUT_S + 4),               #    twice: the run stops
    ]
    with ScriptedServer(script, lifetime_s=300) as server:
        result = optimize(kernel, work, "llm", server, iterations=8)
        requests = list(server.requests)
        base_url = server.base_url
    assert result.returncode == 0, result.stdout + result.stderr
    record, attempts = read_run(work)
    return dict(work=work, kernel=kernel, script=script, requests=requests, base_url=base_url,
                record=record, attempts=attempts, stdout=result.stdout)


@pytest.mark.slow
def test_a_good_remap_is_accepted_and_ranked_best(llm_run):
    record, attempts = llm_run["record"], llm_run["attempts"]
    assert [a["iteration"] for a in attempts] == list(range(7))
    assert [a["origin"] for a in attempts] == ["baseline"] + ["llm"] * 6
    good = attempts[1]
    assert failure(good) is None and good["source"] == ROW_REMAP
    assert good["family"] == "llm:giving-each-xcd-whole-rows"
    assert good["rationale"].startswith("My new swizzling approach will remap blocks by giving each XCD whole rows.")
    assert good["rationale"].endswith("\nReasoning:\nConsecutive ids of one row land on different XCDs.")
    assert good["memory_analysis"] == (f"Access pattern: {ANALYSIS_TEXT}\n\n"
                                       f"Sharing: The CHUNKS programs of one row read the same row (cols * 4 bytes).")
    assert [a["memory_analysis"] for a in attempts[2:]] == [None] * 5  # recorded once, on the attempt that asked
    good_report = good["report"]  # each row on one XCD: only the compulsory fetches
    assert good_report["accesses"] - good_report["hits"] == good_report["unique_lines"]
    assert attempts[0]["report"]["hit_pct"] < good["report"]["hit_pct"] - 40
    assert record["best"] == {"iteration": 1, "family": "llm:giving-each-xcd-whole-rows",
                              "hit_pct": good["report"]["hit_pct"], "source": "sim"}
    run_dir = next((llm_run["work"] / "runs").iterdir())
    assert "return tall * q + (xcd - tall) * (q - 1) + local" in (run_dir / "best" / "remap.py").read_text()
    assert record["proposer"] == "llm"
    assert record["proposer_options"] == {"model": "openai/scripted", "api_base": llm_run["base_url"],
                                          "mode": "aware", "timeout_s": TIMEOUT_S, "retries": RETRIES,
                                          "context_tokens": WINDOW, "max_tokens": None}


@pytest.mark.slow
def test_every_unusable_answer_is_a_recorded_failure_with_its_reason(llm_run):
    attempts = llm_run["attempts"]
    whole_file = attempts[2]  # the whole kernel file, fenced, outside the field format
    assert whole_file["source"].strip() == ROW_REMAP_AGAIN.strip()  # the hook, out of the whole file
    assert failure(whole_file) == ("propose", "this remap is the same implementation as an earlier attempt (after "
                                              "formatting and comments are ignored); propose a remap that differs "
                                              "in what it does")
    missing = "missing field(s) reasoning, critique, approach, why_better, code"
    assert f"The answer did not follow the field format exactly ({missing})." in whole_file["rationale"]

    chatty = attempts[3]  # code between sentences, no fence, no fields
    assert chatty["source"].strip() == CALLS_PROGRAM_ID.strip()
    assert "Extraction: the code was not in a fenced block." in chatty["rationale"]
    stage, detail = failure(chatty)
    assert stage == "static" and detail.startswith("line 4: calls to `tl.program_id` are not allowed")

    naive = attempts[4]
    stage, detail = failure(naive)
    assert naive["source"] == NAIVE and stage == "bijectivity"
    assert "both map to" in detail and "never produced" in detail

    no_code = attempts[5]
    assert no_code["source"] == "" and no_code["family"] == "llm:keeping-the-original-order"
    assert failure(no_code)[0] == "propose"
    assert failure(no_code)[1].startswith("no Python function was found in the answer")


@pytest.mark.slow
def test_a_model_that_never_answers_in_time_stops_the_run_with_the_reason(llm_run):
    record, attempts = llm_run["record"], llm_run["attempts"]
    model_error = (f"openai/scripted gave no answer within {TIMEOUT_S} s for an answer of up to 2,048 tokens, nor "
                   f"of up to 1,024 at {llm_run['base_url']}: raise --llm-timeout or lower --max-tokens, and check "
                   f"that the server is up and not overloaded")
    last = attempts[-1]
    assert last["iteration"] == 6 and last["family"] == "(proposer failed)" and last["usage"] is None
    assert failure(last) == ("propose", f"the proposer failed: {model_error}")
    # optimize.py records the failure and stops instead of spending the rest of its 8 iterations
    assert record["status"] == "finished"
    assert record["status_detail"] == f"the model failed: {model_error}"
    assert len(llm_run["requests"]) == len(llm_run["script"])  # both timed-out requests reached the server
    assert [r.body["max_tokens"] for r in llm_run["requests"][-2:]] == [2048, 1024]  # the second asked for less
    assert [(c["call"], c["outcome"], c["max_tokens"]) for c in last["llm_calls"]] == [
        ("proposal", "timed out", 2048), ("proposal", "timed out", 1024)]


@pytest.mark.slow
def test_the_500_is_retried_and_the_memory_analysis_asked_once(llm_run):
    requests = llm_run["requests"]
    assert ["[[ ## kernel_source ## ]]" in r.text for r in requests] == [True] + [False] * 8
    codegen = requests[1:]
    assert all(f"Access pattern: {ANALYSIS_TEXT}" in r.text for r in codegen)  # the analysis is reused
    assert requests[1].body == requests[2].body  # the request the 500 answered, sent again unchanged
    # What the model saw before its 5th proposal: each earlier failure with its reason.
    shown = requests[6].text
    assert "### iteration 2 (llm, llm:iteration-2)\nOutcome: REJECTED at propose: this remap is the same" in shown
    assert "### iteration 3 (llm, llm:iteration-3)\nOutcome: REJECTED at static: line 4: calls to `tl.program_id`" \
        in shown
    assert "Outcome: REJECTED at bijectivity:" in shown


@pytest.mark.slow
def test_tokens_are_counted_per_attempt_and_totalled_in_the_run(llm_run):
    """Exact: the scripted server counts whitespace-separated words of the request's messages (prompt)
    and of its reply (completion); nothing is priced, so no cost."""
    requests, script, attempts, record = llm_run["requests"], llm_run["script"], llm_run["attempts"], llm_run["record"]

    def billed(*indices: int) -> dict:
        return {"calls": len(indices), "prompt_tokens": sum(word_count(requests[i].text) for i in indices),
                "completion_tokens": sum(word_count(script[i]) for i in indices), "cost_usd": None}

    # request 0 the analysis, 1 the 500 (never billed), 2..6 the answers of iterations 1..5, 7-8 timed out
    expected = [None, billed(0, 2), billed(3), billed(4), billed(5), billed(6), None]
    assert [a["usage"] for a in attempts] == expected
    assert record["usage"] == billed(0, 2, 3, 4, 5, 6)
    usage = record["usage"]
    assert (f"LLM: 6 calls, {usage['prompt_tokens']} prompt + {usage['completion_tokens']} completion tokens"
            in llm_run["stdout"])


# --- hybrid --------------------------------------------------------------------------------------

@pytest.mark.slow
def test_hybrid_alternates_the_llm_with_a_search_refinement_of_its_family(tmp_path):
    """PAIRS is xcd_chunked(chunk=2) in other words: the search skips that very permutation and
    tries its nearest neighbour, chunk=4 (whole rows per XCD turn), which reaches the ceiling."""
    kernel = small_softmax(tmp_path)
    script = [ANALYSIS, proposal(fenced(PAIRS), "pairing neighbouring chunks on one XCD"),
              proposal(NO_CODE, "keeping the original order")]
    with ScriptedServer(script, lifetime_s=300) as server:
        result = optimize(kernel, tmp_path, "hybrid", server, iterations=3)
        requests = list(server.requests)
    assert result.returncode == 0, result.stdout + result.stderr
    record, attempts = read_run(tmp_path)
    assert [(a["origin"], a["family"]) for a in attempts] == [
        ("baseline", "identity (original hook)"), ("llm", "llm:pairing-neighbouring-chunks-on-one-xcd"),
        ("search", "xcd_chunked(chunk=4)"), ("llm", "llm:keeping-the-original-order")]
    llm, search = attempts[1], attempts[2]
    assert failure(llm) is None and failure(search) is None
    assert search["rationale"] == ("refining the family closest to the LLM's best remap (iteration 1): "
                                   "xcd_chunked(chunk=2) (the same permutation; trying its neighbours)")
    assert search["usage"] is None  # the search costs no tokens
    def fetches(report):
        return report["accesses"] - report["hits"]

    assert fetches(llm["report"]) == 2 * llm["report"]["unique_lines"]  # half of each row's chunks per XCD
    assert fetches(search["report"]) == search["report"]["unique_lines"]  # every row on one XCD: compulsory only
    assert record["best"]["iteration"] == 2 and record["proposer"] == "hybrid"
    assert len(requests) == 3 and record["usage"]["calls"] == 3  # analysis once, then one call per LLM turn


# --- resuming an LLM run ---------------------------------------------------------------------------

@pytest.mark.slow
def test_a_resumed_run_reuses_the_recorded_memory_analysis(tmp_path):
    """The model stops answering (401) after one proposal; the resumed run asks for proposals only."""
    kernel = small_softmax(tmp_path)
    script = [ANALYSIS, proposal(fenced(ROW_REMAP)), Failure(401, "invalid api key"),
              proposal(fenced(PAIRS), "pairing neighbouring chunks on one XCD")]
    with ScriptedServer(script, lifetime_s=300) as server:  # the run records the endpoint it resumes with
        first = optimize(kernel, tmp_path, "llm", server, iterations=3)
        assert first.returncode == 0, first.stdout + first.stderr
        record, attempts = read_run(tmp_path)
        assert record["status_detail"].startswith("the model failed") and len(server.requests) == 3
        assert [a["memory_analysis"] is not None for a in attempts] == [False, True, False]

        resumed = swizzleperf(["optimize", "--resume", "latest", "--runs-dir", str(tmp_path / "runs")], tmp_path)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        requests = list(server.requests)
    # one more request, a proposal: the recorded analysis went into its prompt instead of a new analysis call
    assert len(requests) == 4 and "[[ ## code ## ]]" in requests[3].text
    assert f"Access pattern: {ANALYSIS_TEXT}" in requests[3].text
    record, attempts = read_run(tmp_path)
    assert [a["iteration"] for a in attempts] == [0, 1, 2, 3] and attempts[3]["memory_analysis"] is None
    assert attempts[3]["family"] == "llm:pairing-neighbouring-chunks-on-one-xcd" and failure(attempts[3]) is None
    assert attempts[3]["usage"]["calls"] == 1


# --- configuration errors, before any run directory ---------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--proposer", "hybrid"], "error: the LLM proposer needs --model provider/name, e.g. --model openai/gpt-4o"),
    (["--proposer", "llm", "--model", "openai/gpt-4o"],
     "error: --model openai/gpt-4o needs credentials that are not set: OPENAI_API_KEY. Set it in the environment "
     "(export OPENAI_API_KEY=...)"),
])
def test_an_unusable_model_configuration_fails_before_the_run_starts(tmp_path, args, message):
    kernel = small_softmax(tmp_path)
    result = swizzleperf(["optimize", str(kernel), "--hardware", "mi300x", "--no-library",
                          "--runs-dir", str(tmp_path / "runs"), *args], tmp_path)
    assert result.returncode == 2
    assert message in re.sub(r"\s*\n\s*", " ", result.stdout)
    assert "Traceback" not in result.stdout + result.stderr
    assert not (tmp_path / "runs").exists()


# --- tokens spent before a failure -----------------------------------------------------------------

def test_a_failure_after_the_memory_analysis_carries_its_tokens(tmp_path, monkeypatch):
    """The loop stops on an LLMError, so the analysis tokens must travel on the error to reach run.json."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    kernel = load_kernel(small_softmax(tmp_path))
    report = BottleneckReport(source="sim", hardware="mi300x", kernel="softmax", size="small", hit_pct=16.67,
                              ceiling_pct=66.67, accesses=98_304, hits=16_384, unique_lines=16_384, per_domain=[])
    context = ProposalContext(kernel=kernel, hardware=PRESETS["mi300x"], baseline=report, history=[], iteration=1)
    with ScriptedServer([ANALYSIS, Failure(401, "invalid api key")]) as server:
        proposer = make_llm_proposer("openai/scripted", api_base=server.base_url)
        with pytest.raises(LLMError, match="rejected the credentials") as raised:
            proposer.propose(context)
    assert raised.value.usage == LLMUsage(calls=1, prompt_tokens=word_count(server.requests[0].text),
                                          completion_tokens=word_count(ANALYSIS))
    assert raised.value.memory_analysis.startswith(f"Access pattern: {ANALYSIS_TEXT}")  # kept for a resume
    with ScriptedServer([Failure(401, "invalid api key")]) as server:  # nothing was spent
        with pytest.raises(LLMError, match="rejected the credentials") as raised:
            make_llm_proposer("openai/scripted", api_base=server.base_url).propose(context)
    assert raised.value.usage is None and raised.value.memory_analysis is None
