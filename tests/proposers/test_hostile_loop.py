"""The loop survives anything: `optimize --proposer llm` against the scripted server, fed issue 13's
hostile answers, records each with its reason and finishes; `--resume` after them works too.

Before, an answer with an integer literal of 5,000 hex digits crashed the checking child while it
formatted its message, then crashed the next iteration while earlier attempts were normalised:
the run was marked failed, and `--resume` crashed the same way.
"""

import json

import pytest
from hostile_corpus import DECOY, hook
from test_llm_e2e import ANALYSIS, PAIRS, ROW_REMAP, fenced, proposal, small_softmax, swizzleperf

from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.loop.driver import LoopSettings, Observer, run_loop, start_run
from swizzleperf.loop.pipeline import CandidateEvaluator
from swizzleperf.profilers.sim import SimProfiler
from swizzleperf.proposers.llm.scripted_server import Failure, ScriptedServer
from swizzleperf.proposers.scripted import ScriptedProposer

ROW_REMAP_WITH_SEPARATOR = ROW_REMAP.replace("# whole rows per XCD", "# whole rows per XCD\u2028(one die each)")
HOSTILE_ANSWERS = [  # (answer, stage, fragment of the recorded reason)
    (proposal(fenced(hook("return pid + 0x" + "f" * 5_000))), "propose", "an integer literal of about 20,000 bits"),
    (proposal(fenced(hook("for i in range(9223372036854775808):\n    pass\nreturn pid"))), "static",
     "the loop runs 9223372036854775808 times"),
    (proposal(fenced(hook("return " + "-" * 30_000 + "pid"))), "propose", "nested more than 100 levels deep"),
    (proposal(fenced(hook("return " + "a" * 18_000))), "static", "(18,000 characters)` is not defined"),
    (proposal(fenced(hook("return pid") + "#" * 1_100_000)), "propose", "the limit is 1,000,000"),
    (proposal(fenced(hook("return pid" + " + 0" * 60_000))), "propose", "does not parse (RecursionError)"),
    (proposal(fenced(DECOY)), "bijectivity", "all map to 0"),
    (proposal(fenced(ROW_REMAP_WITH_SEPARATOR)), None, ""),
]


def read_run(work):
    """run.json and the attempts, one per "\n" (a recorded U+2028 is not a line break in JSON Lines)."""
    (run_dir,) = (work / "runs").iterdir()
    lines = (run_dir / "attempts.jsonl").read_text().split("\n")
    return json.loads((run_dir / "run.json").read_text()), [json.loads(line) for line in lines if line]


def run_optimize(work, *args):
    done = swizzleperf(["optimize", *args, "--runs-dir", str(work / "runs")], work)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.mark.slow
def test_hostile_answers_are_recorded_and_the_run_finishes_and_resumes(tmp_path):
    kernel = small_softmax(tmp_path)
    script = [ANALYSIS, *(answer for answer, _, _ in HOSTILE_ANSWERS), Failure(401, "invalid api key"),
              proposal(fenced(PAIRS), "pairing neighbouring chunks on one XCD")]
    with ScriptedServer(script, lifetime_s=300) as server:
        run_optimize(tmp_path, str(kernel), "--hardware", "mi300x", "--no-library", "--keep-going", "--proposer",
                     "llm", "--model", "openai/scripted", "--api-base", server.base_url, "-n", "10",
                     "--patience", "20", "--llm-timeout", "60", "--llm-retries", "0")
        record, attempts = read_run(tmp_path)
        assert record["status"] == "finished" and record["status_detail"].startswith("the model failed")
        for attempt, (_, stage, fragment) in zip(attempts[1:], HOSTILE_ANSWERS):
            bad = [s for s in attempt["stages"] if not s["ok"]]
            if stage is None:
                assert not bad and attempt["report"] is not None, attempt["stages"]
                continue
            assert bad and bad[0]["stage"] == stage and fragment in bad[0]["detail"], bad
            assert "\n" not in bad[0]["detail"] and len(bad[0]["detail"]) < 2000
        assert record["best"]["iteration"] == len(HOSTILE_ANSWERS)  # the valid one with U+2028 in a comment

        run_optimize(tmp_path, "--resume", "latest")  # normalises every earlier attempt again
    record, attempts = read_run(tmp_path)
    assert [a["iteration"] for a in attempts] == list(range(11))
    assert attempts[10]["family"] == "llm:pairing-neighbouring-chunks-on-one-xcd"
    assert all(s["ok"] for s in attempts[10]["stages"])
    assert record["status"] == "finished" and record["status_detail"] == "reached 10 iterations"


class _FailsOnce(ScriptedProposer):
    """A proposer with a bug: its first call raises a bare exception (not a SwizzlePerfError)."""

    def propose(self, context):
        if not getattr(self, "failed", False):
            self.failed = True
            raise RuntimeError("a bug in the proposer")
        return super().propose(context)


class _BrokenDisplay(Observer):
    def attempt(self, attempt, history):
        raise ValueError("the terminal went away")


def test_no_exception_while_handling_an_attempt_stops_the_loop(tmp_path):
    kernel = load_kernel(small_softmax(tmp_path))
    hw = PRESETS["mi300x"]
    profiler = SimProfiler(hw, cache_dir=tmp_path / "cache")
    hex_literal = hook("return pid + 0x" + "f" * 5_000)
    proposer = _FailsOnce(["(the failed call's turn)", hex_literal, hook("return num_pids - 1 - pid")])
    run = start_run(tmp_path / "runs", kernel, "small", hw, "test", profiler, "test", proposer, {},
                    LoopSettings(iterations=3, patience=10, stop_at_ceiling=False))
    history = run_loop(run, kernel, proposer, CandidateEvaluator(kernel, hw, profiler, "small"), run.load_history(),
                       _BrokenDisplay())
    failures = [(a.failure.stage, a.failure.detail) if a.failure else None for a in history.attempts]
    assert failures[0] is None and failures[3] is None
    assert failures[1] == ("propose", "the proposer failed: RuntimeError: a bug in the proposer")
    assert failures[2][0] == "static" and "an integer literal of about 20,000 bits" in failures[2][1]
    assert run.record.status == "finished" and len(run.load_history()) == 4
