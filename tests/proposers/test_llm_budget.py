"""The context budget against the scripted server playing a llama.cpp server with a small window: it says
its n_ctx at /props, counts "tokens" (words) at /tokenize, and refuses a request whose prompt and
max_tokens exceed the window. A prompt too long is shortened in the stated order and the call
succeeds; a prompt that cannot fit is one error line before any call."""

import contextlib
import http.server
import threading

import pytest
from llm_runs import ROOT, read_run, small_softmax, swizzleperf

from swizzleperf.errors import ContextWindowError, LLMError
from swizzleperf.hardware.presets import PRESETS
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.proposers.base import ProposalContext
from swizzleperf.proposers.llm.budget import TEMPLATE_TOKENS, ContextBudget, TokenCounter, Variant, Window
from swizzleperf.proposers.llm.proposer import CUT, LEFT_OUT, make_llm_proposer
from swizzleperf.proposers.llm.scripted_server import Reply, ScriptedServer, chat_reply, word_count
from swizzleperf.proposers.llm.server_info import Tokenizer, probe
from swizzleperf.proposers.llm.signatures import ProposeSwizzle
from swizzleperf.records.proposal import AttemptView
from swizzleperf.records.report import BottleneckReport

REMAP = '''@triton.jit
def swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):
    return (pid % NUM_XCDS) * (num_pids // NUM_XCDS) + pid // NUM_XCDS
'''
ANSWER = chat_reply(reasoning="r", critique={}, approach="My new swizzling approach will remap blocks by rows.",
                    why_better="b", code=f"```python\n{REMAP}```")
ANALYSIS = chat_reply(access_pattern="Each program reads its whole row.", sharing="The CHUNKS programs of a row.")
# Recorded by an earlier attempt (a resumed run): reused, so each proposal is one request. Long enough that
# leaving it out saves more than a step of the window sweep below.
RECORDED_ANALYSIS = "Access pattern: " + "each program reads the whole row and writes its own chunk; " * 20
DIFF = "\n".join(f"+    line {n} of a rejected remap that the history shows as a diff" for n in range(12))


def history() -> list[AttemptView]:
    """Four earlier attempts; iteration 2 is the best accepted one, so it is left out last."""
    views = []
    for i in range(1, 5):
        accepted = i == 2
        views.append(AttemptView(iteration=i, origin="llm", family=f"llm:idea-{i}", diff=DIFF, accepted=accepted,
                                 stage=None if accepted else "bijectivity", hit_pct=70.0 if accepted else None,
                                 reason=None if accepted else f"programs {i} and {i + 8} both map to 0"))
    return views


@pytest.fixture(scope="module")
def kernel():
    return load_kernel(ROOT / "kernels/softmax.py")


def context(kernel, views=(), analysis=RECORDED_ANALYSIS, watcher=None) -> ProposalContext:
    report = BottleneckReport(source="sim", hardware="mi300x", kernel="softmax", size="medium", hit_pct=13.0,
                              ceiling_pct=80.0, accesses=4_000_000, hits=520_000, unique_lines=800_000,
                              per_domain=[])
    return ProposalContext(kernel=kernel, hardware=PRESETS["mi300x"], baseline=report, history=list(views),
                           iteration=len(views) + 1, memory_analysis=analysis, watcher=watcher)


class Watcher:
    """What a person watching the run would see: the calls while they run, and the notes."""

    def __init__(self):
        self.calls, self.notes = [], []

    @contextlib.contextmanager
    def model_call(self, what):
        self.calls.append(what)
        yield

    def model_note(self, line):
        self.notes.append(line)


def propose_in(window: int, kernel, views, script=(ANSWER,), watcher=None):
    """One proposal against a server with `window`: (proposal or the error, the server). A script that starts
    with the analysis asks for it; otherwise the recorded one is reused."""
    analysis = None if script[0] == ANALYSIS else RECORDED_ANALYSIS
    with ScriptedServer(list(script), context_window=window) as server:
        proposer = make_llm_proposer("openai/scripted", api_base=server.base_url)
        try:
            return proposer.propose(context(kernel, views, analysis, watcher)), server
        except (ContextWindowError, LLMError) as exc:
            return exc, server


def test_a_prompt_too_long_is_shortened_in_the_stated_order_and_every_call_succeeds(kernel):
    """Sweep the window down: the history goes first (oldest entry first, the best one last), then the memory
    analysis, then the kernel source outside the hooks and their callers; then max_tokens shrinks; then the
    call cannot be made. Every call before that is accepted by a server that refuses what does not fit."""
    views = history()
    first, _ = propose_in(32_768, kernel, views)
    full = first.llm_calls[0].prompt_measured
    seen, lowered = [], []
    window = full + 2048
    while True:
        result, server = propose_in(window, kernel, views)
        if isinstance(result, Exception):
            break
        (call,) = result.llm_calls
        (request,) = server.requests
        assert result.source == REMAP and call.outcome == "answered"
        assert call.prompt_measured == call.prompt_tokens + 2 * TEMPLATE_TOKENS  # the server's words, 2 messages
        assert call.prompt_tokens + call.max_tokens <= window and request.body["max_tokens"] == call.max_tokens
        if tuple(call.left_out) not in [s[0] for s in seen]:
            seen.append((tuple(call.left_out), request.text))
        if call.max_tokens < 2048:
            lowered.append((window, call.max_tokens, call.prompt_measured))
        window -= 100  # less than any one shortening step saves (a history entry: ~170 words)
    assert [s[0] for s in seen] == [
        (), ("1 of 4 history entries",), ("2 of 4 history entries",), ("3 of 4 history entries",),
        ("4 of 4 history entries",), ("4 of 4 history entries", "the memory analysis"),
        ("4 of 4 history entries", "the memory analysis", CUT)]
    shown = [[i for i in range(1, 5) if f"### iteration {i} (" in text] for _, text in seen]
    assert shown[:5] == [[1, 2, 3, 4], [2, 3, 4], [2, 4], [2], []]  # the best (2) stays longest
    assert RECORDED_ANALYSIS.strip() in seen[4][1] and LEFT_OUT in seen[5][1]
    assert "def softmax(" in seen[5][1] and "def softmax(" not in seen[6][1]  # the host wrapper goes last
    assert "def softmax_kernel(" in seen[6][1] and "def swizzle(" in seen[6][1]
    assert lowered and all(tokens == w - measured for w, tokens, measured in lowered)
    assert min(tokens for _, tokens, _ in lowered) >= 256
    assert isinstance(result, ContextWindowError) and server.requests == []  # no call was made


def test_a_prompt_that_cannot_fit_says_so_in_one_line_before_any_call(kernel):
    result, server = propose_in(600, kernel, history(), script=(ANALYSIS, ANSWER))
    assert isinstance(result, ContextWindowError) and server.requests == []
    message = str(result)
    assert "\n" not in message
    assert message.startswith("the memory analysis prompt needs ")
    assert message.endswith(f"even without {CUT} (measured with the server's tokenizer (POST /tokenize)); with 256 "
                            f"for the answer that is more than the model's context window of 600 tokens (the "
                            f"server (GET /props n_ctx)): start the server with a larger context (llama.cpp: -c N, "
                            f"llama-cpp-python: --n_ctx N)")


def test_the_memory_analysis_is_cut_to_the_hooks_and_their_callers_when_the_source_does_not_fit(kernel):
    full, server = propose_in(32_768, kernel, [], script=(ANALYSIS, ANSWER))
    analysis_call = full.llm_calls[0]
    assert analysis_call.call == "memory analysis" and analysis_call.left_out == []
    window = analysis_call.prompt_measured + 1024 - 1  # one token short of the full source and its answer
    result, server = propose_in(window, kernel, [], script=(ANALYSIS, ANSWER))
    first = result.llm_calls[0]
    assert first.call == "memory analysis" and first.left_out == [CUT] and first.max_tokens == 1024
    assert "def softmax(" not in server.requests[0].text and "def softmax_kernel(" in server.requests[0].text


def test_the_window_tokenizer_and_each_call_are_shown_to_the_person_watching(kernel):
    watcher = Watcher()
    result, server = propose_in(6000, kernel, [], watcher=watcher)
    (call,) = result.llm_calls
    assert watcher.notes == ["LLM: context window 6,000 tokens (the server (GET /props n_ctx)); prompts measured "
                             "with the server's tokenizer (POST /tokenize)"]
    assert watcher.calls == [f"openai/scripted: proposal, {call.prompt_measured:,} tokens in, "
                             f"≤{call.max_tokens:,} out"]
    assert call.parts["original_code"] == word_count(kernel.source)  # each input measured alike
    assert sum(call.parts.values()) < call.prompt_measured  # the field names and instructions come on top


def test_a_server_without_a_window_or_tokenizer_gets_the_default_and_an_estimate(kernel):
    watcher = Watcher()
    with ScriptedServer([ANSWER]) as server:
        proposal = make_llm_proposer("openai/scripted", api_base=server.base_url).propose(
            context(kernel, watcher=watcher))
    (call,) = proposal.llm_calls
    assert watcher.notes == [
        "LLM: context window 8,192 tokens (a default: the server does not say its window, --context-tokens sets "
        "it); prompts measured with an estimate of 2.5 characters a token",
        f"LLM: {server.base_url[:-3]} offers no tokenizer endpoint (POST /tokenize or /extras/tokenize/count): "
        f"prompt sizes are estimated"]
    assert call.window == 8192 and call.measured_by == "an estimate of 2.5 characters a token"
    assert call.prompt_measured > call.prompt_tokens  # the estimate errs on the long side


def test_a_chat_template_that_drops_system_messages_gets_the_instructions_in_the_user_message(kernel):
    watcher = Watcher()
    with ScriptedServer([ANSWER], context_window=32_768, drops_system=True) as server:
        facts = probe(server.base_url, "scripted")
        make_llm_proposer("openai/scripted", api_base=server.base_url).propose(context(kernel, watcher=watcher))
    assert facts.drops_system and len(server.probes) == 4  # two probes each: by probe() and by the proposer
    (request,) = server.requests
    assert [m["role"] for m in request.messages] == ["user"]
    assert request.messages[0]["content"].startswith("Your input fields are:")
    assert "the server's chat template drops system messages" in watcher.notes[1]


def test_answers_without_any_field_bring_one_line_about_the_chat_template(kernel):
    watcher = Watcher()
    script = ["I think the remap is fine as it is.", "Still no fields here."]
    with ScriptedServer(script, context_window=32_768) as server:
        proposer = make_llm_proposer("openai/scripted", api_base=server.base_url)
        first = proposer.propose(context(kernel, watcher=watcher))
        proposer.propose(context(kernel, watcher=watcher))
    template = [n for n in watcher.notes if "chat template" in n]
    assert template == ["LLM: openai/scripted's answer has none of the requested fields ([[ ## reasoning ## ]], "
                        "[[ ## critique ## ]], [[ ## approach ## ]], [[ ## why_better ## ]], [[ ## code ## ]]): "
                        "its chat template may be wrong or missing (llama.cpp uses the GGUF's "
                        "tokenizer.chat_template or --chat_format; without one it falls back to a generic "
                        "format), or the model is too small to follow it; code in the answer is still read"]
    assert first.extraction_error.startswith("no Python function was found in the answer")


def test_an_answer_cut_at_max_tokens_says_so_in_its_rationale(kernel):
    with ScriptedServer([Reply(ANSWER, finish_reason="length")], context_window=32_768) as server:
        proposal = make_llm_proposer("openai/scripted", api_base=server.base_url, max_tokens=700).propose(
            context(kernel))
    assert proposal.llm_calls[0].finish_reason == "length" and server.requests[0].body["max_tokens"] == 700
    assert proposal.rationale.endswith("\nThe answer was cut at max_tokens (700).")


class Garbled(http.server.BaseHTTPRequestHandler):
    """A server whose every reply is unusable: not JSON, the wrong shape, a count that is not a number."""

    def log_message(self, *args):
        pass

    def _send(self, body: bytes):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._send(b"<html>props</html>" if self.path == "/props" else b'{"data": "none"}')

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send(b'{"count": "many"}' if "tokenize" in self.path else b'{"usage": {"prompt_tokens": -1}}')


def test_unusable_server_replies_mean_not_said_and_nothing_raises():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Garbled)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        facts = probe(f"http://127.0.0.1:{server.server_address[1]}/v1", "m")
    finally:
        server.shutdown()
        server.server_close()
    assert (facts.window, facts.tokenizer, facts.drops_system) == (None, None, False)
    assert facts.notes == (f"http://127.0.0.1:{server.server_address[1]} offers no tokenizer endpoint (POST "
                           f"/tokenize or /extras/tokenize/count): prompt sizes are estimated",)


def test_a_tokenizer_that_stops_answering_falls_back_to_the_estimate_once():
    counter = TokenCounter(Tokenizer("http://127.0.0.1:9/tokenize", "content", "m", "the server's tokenizer"))
    assert counter.count("a" * 25) == 10  # port 9 answers nothing: 25 characters at 2.5 a token
    assert counter.note.startswith("the server's tokenizer stopped answering (no answer")
    assert counter.label == "an estimate of 2.5 characters a token"


def test_max_tokens_given_by_the_user_is_every_calls_answer_budget():
    budget = ContextBudget(Window(4000, "--context-tokens"), TokenCounter(None), max_tokens=300)
    assert budget.answer_tokens("proposal") == budget.answer_tokens("memory analysis") == 300
    inputs = dict(original_code="def swizzle(pid): return pid", bottleneck_report="r", memory_analysis="m",
                  history="h", hardware="x", goal="g", rules="rules")
    fitted = budget.fit("proposal", ProposeSwizzle, [Variant(inputs)])
    assert fitted.max_tokens == 300 and fitted.window == 4000 and fitted.parts["original_code"] == 12  # 29 chars


@pytest.mark.slow
def test_the_cli_says_an_impossible_fit_in_one_error_line_and_the_run_resumes_with_a_larger_window(tmp_path):
    kernel = small_softmax(tmp_path)
    runs = str(tmp_path / "runs")
    with ScriptedServer([ANALYSIS, ANSWER, "no code this time"], context_window=500) as server:
        result = swizzleperf(["optimize", str(kernel), "--hardware", "mi300x", "--no-library", "-n", "2", "--model",
                              "openai/scripted", "--api-base", server.base_url, "--runs-dir", runs], tmp_path)
        assert result.returncode == 2 and server.requests == []
        errors = [line for line in result.stdout.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and errors[0].startswith("error: the memory analysis prompt needs ")
        assert "context window of 500 tokens (the server (GET /props n_ctx))" in errors[0]
        assert "Traceback" not in result.stdout + result.stderr
        record, attempts = read_run(tmp_path)
        assert [a["origin"] for a in attempts] == ["baseline"]  # nothing was spent, the baseline is kept
        assert record["status"] == "failed" and record["status_detail"].startswith("ContextWindowError: the memory")

        server.context_window = 32_768  # the server restarted with a larger context
        resumed = swizzleperf(["optimize", "--resume", "latest", "--runs-dir", runs, "--max-tokens", "300"], tmp_path)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert [r.body["max_tokens"] for r in server.requests] == [300] * 3  # the analysis, then each proposal
    record, attempts = read_run(tmp_path)
    assert [a["iteration"] for a in attempts] == [0, 1, 2] and record["status_detail"] == "reached 2 iterations"
    assert record["proposer_options"]["max_tokens"] == 300 and record["proposer_options"]["timeout_s"] == 180
    assert [c["call"] for a in attempts for c in a["llm_calls"]] == ["memory analysis", "proposal", "proposal"]
