"""The model client through the real DSPy path against the scripted server: configuration,
retries, timeouts, accounting and the cache. No test reaches the internet."""

import socket
import time

import dspy
import pytest

from swizzleperf.errors import LLMError
from swizzleperf.proposers.llm.client import PLACEHOLDER_KEY, ModelConfig, check_config, connect
from swizzleperf.proposers.llm.proposer import make_llm_proposer
from swizzleperf.proposers.llm.scripted_server import Failure, Reply, ScriptedServer, chat_reply, word_count
from swizzleperf.records.proposal import LLMUsage


class Echo(dspy.Signature):
    """Answer the question."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


CREDENTIALS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_BASE",
               "OPENAI_BASE_URL", "HOSTED_VLLM_API_BASE")


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch):
    """Every test starts with no provider keys, whatever the machine has."""
    for name in CREDENTIALS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def no_network(monkeypatch):
    """Fail on any outgoing connection: configuration checks must not touch the network."""
    def refuse(self, address):
        raise AssertionError(f"unexpected network connection to {address}")
    monkeypatch.setattr(socket.socket, "connect", refuse)


def client_for(server, model="openai/scripted-model", sleeps=None, **options):
    config = ModelConfig(model=model, api_base=server.base_url, backoff_s=0.05, **options)
    return connect(config, sleep=(sleeps.append if sleeps is not None else time.sleep))


# --- configuration, checked before any call -----------------------------------------------------

@pytest.mark.parametrize("model, variable", [("openai/gpt-4o", "OPENAI_API_KEY"),
                                             ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY")])
def test_a_missing_key_is_an_llm_error_naming_the_variable_before_any_call(model, variable, no_network):
    with pytest.raises(LLMError) as raised:
        make_llm_proposer(model)
    assert f"needs credentials that are not set: {variable}" in str(raised.value)
    assert f"export {variable}=..." in str(raised.value) and "--api-base" in str(raised.value)


def test_a_key_in_the_environment_satisfies_the_check(monkeypatch, no_network):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    check_config(ModelConfig(model="openai/gpt-4o"))


@pytest.mark.parametrize("model, api_base", [
    ("openai/my-local-model", "http://127.0.0.1:8000/v1"),  # any api_base: the key is optional
    ("hosted_vllm/Qwen/Qwen2.5-Coder-32B-Instruct", None),   # local providers need none
    ("ollama_chat/qwen2.5-coder", None),
])
def test_local_servers_need_no_key(model, api_base, no_network):
    check_config(ModelConfig(model=model, api_base=api_base))


@pytest.mark.parametrize("model, api_base, message", [
    (None, None, "needs --model provider/name"),
    ("gpt-4o", None, "--model must be provider/name"),
    ("nosuchprovider/model", None, "unknown provider 'nosuchprovider'"),
    ("openai/gpt-4o", "localhost:8000", r"--api-base must be an http\(s\) URL"),
])
def test_malformed_configuration_is_refused_with_the_fix(model, api_base, message, no_network):
    with pytest.raises(LLMError, match=message):
        make_llm_proposer(model, api_base=api_base)


def test_settings_the_model_refuses_are_an_llm_error(no_network):
    with pytest.raises(LLMError, match="cannot configure --model openai/gpt-5: .*temperature"):
        connect(ModelConfig(model="openai/gpt-5", api_base="http://127.0.0.1:1/v1", temperature=0.2))


def test_an_unknown_mode_is_refused(no_network):
    with pytest.raises(LLMError, match="choose one of aware, unaware, overload"):
        make_llm_proposer("openai/m", api_base="http://127.0.0.1:1/v1", mode="verbose")


# --- calls through the real client path ---------------------------------------------------------

def test_an_answer_is_parsed_and_its_tokens_counted():
    reply = chat_reply(answer="forty-two")
    with ScriptedServer([reply]) as server:
        answer = client_for(server).predict(Echo, question="what is six times seven?")
    assert answer.fields == {"answer": "forty-two"} and answer.parse_error is None
    assert answer.raw == reply
    (request,) = server.requests
    assert request.body["model"] == "scripted-model"
    assert request.headers["Authorization"] == f"Bearer {PLACEHOLDER_KEY}"  # no key configured: a placeholder
    assert "what is six times seven?" in request.text
    assert answer.usage == LLMUsage(calls=1, prompt_tokens=word_count(request.text),
                                    completion_tokens=word_count(reply), cost_usd=None)  # nobody prices it


def test_a_local_provider_string_works_without_any_key():
    with ScriptedServer([chat_reply(answer="local")]) as server:
        answer = client_for(server, model="hosted_vllm/Qwen/Qwen2.5-Coder-7B-Instruct").predict(Echo, question="q")
    assert answer.fields == {"answer": "local"}
    assert server.requests[0].body["model"] == "Qwen/Qwen2.5-Coder-7B-Instruct"
    assert PLACEHOLDER_KEY not in server.requests[0].headers.get("Authorization", "")


def test_cost_is_recorded_when_the_model_is_priced():
    with ScriptedServer([Reply(chat_reply(answer="x"), prompt_tokens=1000, completion_tokens=100)]) as server:
        usage = client_for(server, model="openai/gpt-4o-mini").predict(Echo, question="q").usage
    assert usage.prompt_tokens == 1000 and usage.completion_tokens == 100
    assert usage.cost_usd is not None and 0 < usage.cost_usd < 0.01


def test_transient_failures_are_retried_with_backoff_then_succeed():
    sleeps = []
    with ScriptedServer([Failure(500), Failure(503), Failure(429), chat_reply(answer="ok")]) as server:
        answer = client_for(server, sleeps=sleeps, retries=3).predict(Echo, question="q")
    assert answer.fields == {"answer": "ok"} and len(server.requests) == 4
    assert sleeps == [0.05, 0.1, 0.2]  # exponential backoff
    assert answer.usage.calls == 1  # failed attempts cost nothing


def test_retries_run_out_with_a_clear_error():
    sleeps = []
    with ScriptedServer([Failure(502, "bad gateway")] * 3) as server:
        with pytest.raises(LLMError, match=r"failed \(HTTP 502\) on all 3 attempts: .*bad gateway"):
            client_for(server, sleeps=sleeps, retries=2).predict(Echo, question="q")
    assert len(server.requests) == 3 and len(sleeps) == 2


@pytest.mark.parametrize("status, message", [(401, "rejected the credentials"), (404, "was not found"),
                                             (400, "refused the request \\(HTTP 400\\)")])
def test_client_errors_are_not_retried(status, message):
    sleeps = []
    with ScriptedServer([Failure(status), chat_reply(answer="never")]) as server:
        with pytest.raises(LLMError, match=message):
            client_for(server, sleeps=sleeps, retries=3).predict(Echo, question="q")
    assert len(server.requests) == 1 and sleeps == []


def test_a_timed_out_call_is_retried_once_with_half_the_max_tokens_then_is_a_clear_error():
    """Not retried blindly: --llm-retries does not apply, the second request asks for a shorter answer."""
    with ScriptedServer([Reply(chat_reply(answer="late"), delay_s=3)] * 3) as server:
        start = time.monotonic()
        with pytest.raises(LLMError) as raised:
            client_for(server, timeout_s=0.5, retries=3, max_tokens=600).predict(Echo, question="q")
        assert time.monotonic() - start < 2.5  # the client gave up; it did not wait for the reply
    assert str(raised.value) == (f"openai/scripted-model gave no answer within 0.5 s for an answer of up to 600 "
                                 f"tokens, nor of up to 300 at {server.base_url}: raise --llm-timeout or lower "
                                 f"--max-tokens, and check that the server is up and not overloaded")
    assert [r.body["max_tokens"] for r in server.requests] == [600, 300]
    assert [(c.call, c.outcome, c.max_tokens, c.prompt_tokens) for c in raised.value.llm_calls] == [
        ("Echo", "timed out", 600, None), ("Echo", "timed out", 300, None)]


def test_an_answer_after_a_timeout_is_the_answer_of_the_shorter_request():
    with ScriptedServer([Reply(chat_reply(answer="late"), delay_s=3), chat_reply(answer="short")]) as server:
        answer = client_for(server, timeout_s=0.5, max_tokens=600).predict(Echo, question="q")
    assert answer.fields == {"answer": "short"} and answer.usage.calls == 1
    assert [(c.outcome, c.max_tokens) for c in answer.calls] == [("timed out", 600), ("answered", 300)]
    assert answer.calls[1].prompt_tokens == word_count(server.requests[1].text)
    assert answer.calls[1].finish_reason == "stop" and answer.calls[1].answer == chat_reply(answer="short")
    assert answer.calls[0].answer is None


def test_an_unreachable_server_is_a_clear_error():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = ModelConfig(model="openai/m", api_base=f"http://127.0.0.1:{port}/v1", retries=1, backoff_s=0.01)
    with pytest.raises(LLMError, match="cannot reach openai/m at .* after 2 attempts.*check --api-base"):
        connect(config).predict(Echo, question="q")


def test_the_cache_never_replays_an_identical_prompt():
    with ScriptedServer([chat_reply(answer="first"), chat_reply(answer="second")]) as server:
        client = client_for(server)
        one = client.predict(Echo, question="the same question")
        two = client.predict(Echo, question="the same question")
    assert (one.fields["answer"], two.fields["answer"]) == ("first", "second")
    assert server.requests[0].body == server.requests[1].body  # the same prompt reached the server twice
    assert one.usage.calls == two.usage.calls == 1 and two.usage.prompt_tokens > 0


def test_an_answer_outside_the_field_format_is_returned_raw_without_a_second_call():
    with ScriptedServer(["The answer is forty-two.", chat_reply(answer="unused")]) as server:
        answer = client_for(server).predict(Echo, question="q")
    assert answer.fields == {} and answer.raw == "The answer is forty-two."
    assert answer.parse_error == "missing field(s) answer"
    assert len(server.requests) == 1  # DSPy's JSON-adapter fallback (a second paid call) is off
    assert answer.usage.calls == 1
