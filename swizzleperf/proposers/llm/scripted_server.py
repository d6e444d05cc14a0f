"""A scripted OpenAI-compatible chat server, for tests and for trying the loop without a model.

It answers `POST /v1/chat/completions` from a queue of scripted replies and records every
request, so the real client path (DSPy, its HTTP engine, the adapter's parser) is exercised
end to end. A reply is a text (with `usage` token counts), an HTTP error status, or a text
sent only after a delay. It binds to 127.0.0.1 on a free port, answers at most
`max_requests` requests (the script's length plus a few) and stops by itself after `lifetime_s` seconds.

With `context_window=N` it also plays a llama.cpp server's context: `GET /props` says n_ctx N,
`POST /tokenize` counts words (its "tokens", as in its usage counts), and a chat request whose
prompt words plus max_tokens exceed N is refused with HTTP 400, as an over-long request is.
A request for one token (swizzleperf's probe of the chat template, server_info.py) is answered
outside the script with its word count and kept in `probes`; `drops_system=True` plays a chat
template without a system role: system messages count for nothing.

    with ScriptedServer([chat_reply(answer="42"), Failure(500), Reply("late", delay_s=5)]) as server:
        lm = dspy.LM("openai/scripted", api_base=server.base_url, api_key="unused")
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_PATH = "/v1/chat/completions"
_SPARE_REQUESTS = 8  # answered with "no reply left" before the hard bound refuses


@dataclass(frozen=True)
class Reply:
    """An answer. Token counts default to word counts of the request's messages and of the text."""

    text: str
    delay_s: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"  # "length": the answer was cut at max_tokens


@dataclass(frozen=True)
class Failure:
    """An HTTP error answer (500 to exercise retries, 401 for a bad key, ...)."""

    status: int
    message: str = "scripted failure"


Script = str | Reply | Failure


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]  # names in title case (Authorization), however the client spelt them
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages") or []

    @property
    def text(self) -> str:
        """All message contents joined: what the model was shown."""
        return "\n\n".join(_content_text(m.get("content")) for m in self.messages)

    def seen(self, drops_system: bool) -> str:
        """What a template that drops system messages (or not) lets through."""
        kept = [m for m in self.messages if not (drops_system and m.get("role") == "system")]
        return "\n\n".join(_content_text(m.get("content")) for m in kept)


def _content_text(content: Any) -> str:
    if isinstance(content, list):  # the parts form: [{"type": "text", "text": ...}]
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def word_count(text: str) -> int:
    return len(text.split())


def chat_reply(**fields: Any) -> str:
    """An answer in DSPy's chat-adapter format: `[[ ## name ## ]]` sections, then `completed`.

    Written here rather than borrowed from DSPy, so a test proves DSPy parses what a model
    would write. Dicts and lists are written as JSON.
    """
    sections = []
    for name, value in fields.items():
        body = json.dumps(value, indent=2) if isinstance(value, (dict, list)) else str(value)
        sections.append(f"[[ ## {name} ## ]]\n{body}")
    return "\n\n".join(sections + ["[[ ## completed ## ]]"]) + "\n"


class ScriptedServer:
    """A bounded chat-completions server in a background thread (see the module docstring)."""

    def __init__(self, script: list[Script], *, lifetime_s: float = 60.0, max_requests: int | None = None,
                 context_window: int | None = None, drops_system: bool = False):
        self._script = [Reply(item) if isinstance(item, str) else item for item in script]
        self.context_window = context_window
        self.drops_system = drops_system
        self.probes: list[RecordedRequest] = []  # one-token requests, answered outside the script
        self.max_requests = len(self._script) + _SPARE_REQUESTS if max_requests is None else max_requests
        self.lifetime_s = lifetime_s
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()  # set first: wakes handlers sleeping out a delay
        self._closed = threading.Event()  # set last: the port no longer accepts connections
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> "ScriptedServer":
        handler = type("ScriptedHandler", (_Handler,), {"server_ref": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="scripted-llm-server", daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        """Stop serving; safe to call twice and from any thread."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self._timer is not None:
            self._timer.cancel()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        self._closed.set()

    def __enter__(self) -> "ScriptedServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- what tests read -------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the scripted server is not started; use it as a context manager")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    @property
    def stopped(self) -> bool:
        """True once the server no longer accepts connections."""
        return self._closed.is_set()

    # --- serving ---------------------------------------------------------------------------
    def _next(self, request: RecordedRequest) -> Script | str:
        """The scripted item for this request, or an explanation of why there is none."""
        with self._lock:
            self.requests.append(request)
            if len(self.requests) > self.max_requests:
                return f"the scripted server answers at most {self.max_requests} requests"
            if not self._script:
                return f"the scripted server has no reply left for request {len(self.requests)}"
            return self._script.pop(0)


class _Handler(BaseHTTPRequestHandler):
    server_ref: ScriptedServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        window = self.server_ref.context_window
        if window is None or self.path.rstrip("/") != "/props":
            return self._send(404, _error(f"GET {self.path} is not scripted", "not_found"))
        self._send(200, {"default_generation_settings": {"n_ctx": window}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            return self._send(400, _error("request body is not JSON", "invalid_request_error"))
        if self.path.rstrip("/") == "/tokenize" and self.server_ref.context_window is not None:
            return self._send(200, {"tokens": [0] * word_count(str(body.get("content", "")))})
        if self.path.rstrip("/") != CHAT_PATH:
            return self._send(404, _error(f"only {CHAT_PATH} is scripted, not {self.path}", "not_found"))
        if body.get("stream"):
            return self._send(400, _error("streaming is not scripted; call without stream", "invalid_request_error"))
        request = RecordedRequest(self.path, {k.title(): v for k, v in self.headers.items()}, body)
        if body.get("max_tokens") == 1:  # a probe of the chat template, not a call of the script
            with self.server_ref._lock:
                self.server_ref.probes.append(request)
            return self._send(200, _completion(body, Reply("x"), request, self.server_ref.drops_system))
        too_long = _over_window(self.server_ref.context_window, request.seen(self.server_ref.drops_system), body)
        if too_long:
            with self.server_ref._lock:
                self.server_ref.requests.append(request)
            return self._send(400, _error(too_long, "exceed_context_size_error"))
        item = self.server_ref._next(request)
        if isinstance(item, str):  # the script is exhausted: a client error, so it is not retried
            return self._send(400, _error(item, "invalid_request_error"))
        if isinstance(item, Failure):
            return self._send(item.status, _error(item.message, "server_error" if item.status >= 500 else "error"))
        if item.delay_s and self.server_ref._stopped.wait(item.delay_s):
            return  # stopped while waiting: drop the connection
        self._send(200, _completion(body, item, request, self.server_ref.drops_system))

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer


def _over_window(window: int | None, seen: str, body: dict) -> str | None:
    """Why the request (`seen`: the text its template lets through) does not fit the context window, or None."""
    if window is None:
        return None
    prompt, answer = word_count(seen), body.get("max_tokens") or 0
    if prompt + answer <= window:
        return None
    return (f"the request exceeds the available context size: {prompt} prompt tokens and max_tokens {answer} "
            f"in a context of {window}")


def _error(message: str, kind: str) -> dict:
    return {"error": {"message": message, "type": kind, "code": None}}


def _completion(body: dict, reply: Reply, request: RecordedRequest, drops_system: bool) -> dict:
    prompt = reply.prompt_tokens if reply.prompt_tokens is not None else word_count(request.seen(drops_system))
    completion = reply.completion_tokens if reply.completion_tokens is not None else word_count(reply.text)
    return {
        "id": f"scripted-{len(reply.text)}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "scripted"),
        "choices": [{"index": 0, "finish_reason": reply.finish_reason,
                     "message": {"role": "assistant", "content": reply.text}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }
