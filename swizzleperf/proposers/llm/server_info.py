"""What a self-hosted OpenAI-compatible server says about its model: the context window and a tokenizer.

Asked once per run over plain HTTP, with a short timeout, at the server's root (the --api-base URL
without its `/v1`); each server says it its own way:

- llama.cpp's `llama-server`: `GET /props` (`default_generation_settings.n_ctx`), `POST /tokenize`;
- vLLM: `GET /v1/models` (the served model's `max_model_len`), `POST /tokenize`;
- llama-cpp-python (`python -m llama_cpp.server`): `POST /extras/tokenize/count`; it does not say its
  window (`--context-tokens` does).

It also finds out whether the server's chat template keeps a system message: two one-token chat
requests, with and without a short system message, and the prompt tokens the server counts for each.

A reply that is missing, not JSON, or of another shape means "not said": nothing here raises, and
`notes` says in one line each what could not be read.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from swizzleperf.untrusted import readback

PROBE_TIMEOUT_S = 5.0
_PROBE_TEXT = "def swizzle(pid, num_pids):"
_SYSTEM_PROBE = ("You answer questions about GPU kernels. Keep every answer short, name the program ids involved, "
                 "and say which die each of them runs on.")  # about 30 tokens with any tokenizer
_MAX_REPLY_BYTES = 4 << 20  # a models list or a token list; a larger reply is not one


class ServerReplyError(Exception):
    """A request to the server failed or its reply was not what the endpoint answers."""


def server_root(api_base: str) -> str:
    """`http://host:port/v1` -> `http://host:port` (the tokenizer and /props live at the root)."""
    root = api_base.rstrip("/")
    return root[:-3] if root.endswith("/v1") else root


def fetch_json(url: str, body: dict | None = None, timeout_s: float = PROBE_TIMEOUT_S) -> Any:
    """GET (or POST `body` as JSON) and parse the reply; ServerReplyError with the reason otherwise."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            raw = response.read(_MAX_REPLY_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise ServerReplyError(f"HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ServerReplyError(f"no answer ({getattr(exc, 'reason', exc)})") from None
    if len(raw) > _MAX_REPLY_BYTES:
        raise ServerReplyError(f"a reply over {_MAX_REPLY_BYTES >> 20} MiB")
    try:
        return readback.parse_json(raw.decode(), "a reply")  # bounded nesting, as everything read back
    except (readback.StoredFileError, UnicodeDecodeError):
        raise ServerReplyError("a reply that is not JSON") from None


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass(frozen=True)
class Tokenizer:
    """The served model's tokenizer behind one endpoint; `count` raises ServerReplyError on a bad reply."""

    url: str
    field: str  # the request's text field: content (llama.cpp), prompt (vLLM), input (llama-cpp-python)
    model: str
    label: str  # e.g. "the server's tokenizer (POST /tokenize)"

    def count(self, text: str, timeout_s: float = PROBE_TIMEOUT_S) -> int:
        reply = fetch_json(self.url, {self.field: text, "model": self.model}, timeout_s)
        if isinstance(reply, dict):
            count = reply.get("count")
            if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                return count
            if isinstance(reply.get("tokens"), list):
                return len(reply["tokens"])
        raise ServerReplyError(f"{self.url} answered without a token count")


@dataclass(frozen=True)
class ServerFacts:
    window: int | None = None
    window_from: str | None = None  # e.g. "GET /props n_ctx"
    tokenizer: Tokenizer | None = None
    drops_system: bool = False  # the chat template drops system messages (their tokens never reach the model)
    notes: tuple[str, ...] = field(default_factory=tuple)


def _window_from_props(root: str) -> tuple[int | None, str | None]:
    reply = fetch_json(f"{root}/props")
    if not isinstance(reply, dict):
        return None, None
    settings = reply.get("default_generation_settings")
    n_ctx = _positive_int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    n_ctx = n_ctx or _positive_int(reply.get("n_ctx"))
    return (n_ctx, "GET /props n_ctx") if n_ctx else (None, None)


def _window_from_models(api_base: str, model: str) -> tuple[int | None, str | None]:
    reply = fetch_json(f"{api_base.rstrip('/')}/models")
    entries = reply.get("data") if isinstance(reply, dict) else None
    if not isinstance(entries, list):
        return None, None
    entries = [e for e in entries if isinstance(e, dict)]
    chosen = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
    for entry in chosen:
        meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
        for where, value in (("max_model_len", entry.get("max_model_len")), ("meta n_ctx", meta.get("n_ctx"))):
            if _positive_int(value):
                return value, f"GET /v1/models {where}"
    return None, None


def _find_tokenizer(root: str, model: str) -> Tokenizer | None:
    candidates = (Tokenizer(f"{root}/tokenize", "content", model, "the server's tokenizer (POST /tokenize)"),
                  Tokenizer(f"{root}/tokenize", "prompt", model, "the server's tokenizer (POST /tokenize)"),
                  Tokenizer(f"{root}/extras/tokenize/count", "input", model,
                            "the server's tokenizer (POST /extras/tokenize/count)"))
    for tokenizer in candidates:
        try:
            if tokenizer.count(_PROBE_TEXT) > 0:
                return tokenizer
        except ServerReplyError:
            continue
    return None


def _prompt_tokens(api_base: str, model: str, messages: list[dict]) -> int | None:
    body = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0}
    reply = fetch_json(f"{api_base.rstrip('/')}/chat/completions", body, PROBE_TIMEOUT_S * 6)
    usage = reply.get("usage") if isinstance(reply, dict) else None
    return _positive_int(usage.get("prompt_tokens")) if isinstance(usage, dict) else None


def drops_system_message(api_base: str, model: str) -> bool | None:
    """Whether the server's chat template drops a system message (None: it could not be told)."""
    user = {"role": "user", "content": "Which die runs program 9?"}
    try:
        bare = _prompt_tokens(api_base, model, [user])
        with_system = _prompt_tokens(api_base, model, [{"role": "system", "content": _SYSTEM_PROBE}, user])
    except ServerReplyError:
        return None
    if bare is None or with_system is None:
        return None
    return with_system - bare < 10


def probe(api_base: str, model: str) -> ServerFacts:
    """What the server at `api_base` says for `model` (its name without the provider): its window, its
    tokenizer, whether its chat template drops system messages; and a line for each thing a user should know."""
    root, notes = server_root(api_base), []
    window, source = None, None
    for ask in (lambda: _window_from_props(root), lambda: _window_from_models(api_base, model)):
        try:
            window, source = ask()
        except ServerReplyError:
            continue
        if window:
            break
    tokenizer = _find_tokenizer(root, model)
    if tokenizer is None:
        notes.append(f"{root} offers no tokenizer endpoint (POST /tokenize or /extras/tokenize/count): "
                     f"prompt sizes are estimated")
    drops = drops_system_message(api_base, model)
    if drops:
        notes.append("the server's chat template drops system messages (a system message added no prompt tokens): "
                     "the instructions go in the user message instead")
    return ServerFacts(window=window, window_from=source, tokenizer=tokenizer, drops_system=bool(drops),
                       notes=tuple(notes))
