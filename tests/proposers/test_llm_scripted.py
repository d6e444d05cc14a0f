"""The scripted OpenAI-compatible server itself: replies in order, records requests, stays bounded."""

import json
import time
import urllib.error
import urllib.request

import pytest

from swizzleperf.proposers.llm.scripted_server import Failure, Reply, ScriptedServer, chat_reply, word_count


def post(server, body, path="/chat/completions", timeout=5.0):
    request = urllib.request.Request(server.base_url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", "Authorization": "Bearer k"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


CHAT = {"model": "m", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]}


def test_replies_come_in_order_with_usage_and_requests_are_recorded():
    with ScriptedServer(["first answer", Failure(503, "busy"), Reply("third", prompt_tokens=7)]) as server:
        status, body = post(server, CHAT)
        assert status == 200 and body["choices"][0]["message"]["content"] == "first answer"
        assert body["usage"] == {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}  # word counts
        assert post(server, CHAT) == (503, {"error": {"message": "busy", "type": "server_error", "code": None}})
        status, body = post(server, CHAT)
        assert body["usage"]["prompt_tokens"] == 7 and body["usage"]["completion_tokens"] == 1
        assert server.remaining == 0
    assert len(server.requests) == 3
    assert server.requests[0].body == CHAT and server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].headers["Authorization"] == "Bearer k"
    assert server.requests[0].text == "be brief\n\nhi there"


def test_an_exhausted_script_answers_a_client_error_that_is_not_retried():
    with ScriptedServer(["only"]) as server:
        post(server, CHAT)
        status, body = post(server, CHAT)
    assert status == 400 and "no reply left for request 2" in body["error"]["message"]


def test_max_requests_bounds_the_server_even_with_replies_left():
    with ScriptedServer(["a", "b", "c"], max_requests=1) as server:
        post(server, CHAT)
        status, body = post(server, CHAT)
    assert status == 400 and "at most 1 requests" in body["error"]["message"]


def test_unknown_paths_and_streaming_are_refused():
    with ScriptedServer(["unused"]) as server:
        assert post(server, CHAT, path="/embeddings")[0] == 404
        assert post(server, {**CHAT, "stream": True})[0] == 400
        assert server.remaining == 1


def test_a_delayed_reply_arrives_after_its_delay():
    with ScriptedServer([Reply("slow", delay_s=0.3)]) as server:
        start = time.monotonic()
        status, body = post(server, CHAT)
        assert status == 200 and time.monotonic() - start >= 0.3


def test_the_server_stops_by_itself_after_its_lifetime():
    server = ScriptedServer(["never sent"], lifetime_s=0.2).start()
    url = server.base_url
    deadline = time.monotonic() + 5
    while not server.stopped and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.stopped
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/chat/completions", data=b"{}", timeout=1)


def test_chat_reply_writes_the_chat_adapter_sections():
    assert chat_reply(reasoning="r", critique={"iteration 1": "x"}) == (
        '[[ ## reasoning ## ]]\nr\n\n[[ ## critique ## ]]\n{\n  "iteration 1": "x"\n}\n\n[[ ## completed ## ]]\n')
    assert word_count(" a  b\nc ") == 3
