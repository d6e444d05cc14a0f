"""The model client: configuration checked before the loop starts, calls with retries, accounting.

Any LiteLLM provider string works (`openai/gpt-4o`, `anthropic/...`, `hosted_vllm/...` or any
model behind an OpenAI-compatible `api_base`). Keys come from the provider's usual environment
variable and are never taken on the command line. `connect()` checks all of it up front and
raises an `LLMError` that names the variable or flag to set, so a run never dies at iteration
one over a missing key.

DSPy's response cache is off for every LM built here: a repeated prompt (an identical history
after a rejected attempt, say) must reach the model again, not replay the last answer with no
usage. DSPy's own retries are off too; this module retries transient failures (HTTP 429 and
5xx, dropped connections) with exponential backoff and turns everything else into one clear
`LLMError`. A timeout is not retried as it was: the call is made once more with half the
max_tokens (a long answer is the usual cause), and a second timeout is the error.

Every request carries a max_tokens (the budget's, see budget.py), so no answer runs on to the end
of the window. An `--api-base` server is called through LiteLLM's OpenAI client, which sends it as
`max_tokens`, the field every self-hosted server reads (DSPy's native OpenAI path sends
`max_completion_tokens`, which llama-cpp-python ignores). Each request becomes an `LLMCall` record
with the server's own token counts.
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable

import dspy
from dspy.utils.exceptions import (
    AdapterParseError,
    ContextWindowExceededError,
    LMAuthError,
    LMError,
    LMNotConfiguredError,
    LMTimeoutError,
    LMTransportError,
    LMUnsupportedModelError,
    is_retryable_lm_error,
)
from pydantic import BaseModel, ConfigDict, Field

from swizzleperf.errors import LLMError
from swizzleperf.proposers.base import ModelWatcher
from swizzleperf.proposers.llm.adapter import chat_adapter
from swizzleperf.proposers.llm.budget import ANSWER_TOKENS, Fitted
from swizzleperf.proposers.llm.extract import split_fields
from swizzleperf.records.proposal import ANSWER_CHARS, LLMCall, LLMUsage


class _NoTruncationWarning(logging.Filter):
    """DSPy logs a paragraph when an answer reaches max_tokens; each LLMCall records it (finish_reason length)
    and the attempt's rationale says it in one sentence."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("LM response was truncated")


logging.getLogger("dspy.clients.lm").addFilter(_NoTruncationWarning())

TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
PLACEHOLDER_KEY = "swizzleperf-no-key"  # sent to an --api-base server when no key is configured
_MAX_RETRY_AFTER_S = 60.0
_HISTORY = 64  # per-call LM copies keep their history, which is where usage is read from


class ModelConfig(BaseModel):
    """Which model to call and how patiently; recorded with a run (no secrets in it)."""

    model_config = ConfigDict(extra="forbid")
    model: str = Field(description="LiteLLM provider string, provider/name, e.g. openai/gpt-4o")
    api_base: str | None = Field(None, description="OpenAI-compatible server URL, e.g. http://localhost:8000/v1")
    timeout_s: float = Field(180.0, gt=0, description="per request")
    retries: int = Field(3, ge=0, description="extra attempts after a transient failure")
    backoff_s: float = Field(2.0, ge=0, description="first retry delay; doubles per retry")
    temperature: float | None = None
    max_tokens: int | None = Field(None, gt=0, description="every call's answer budget (default: per call)")


def _litellm():
    import litellm  # slow to import (seconds): only when a model is configured

    return litellm


def missing_credentials(model: str) -> list[str]:
    """Environment variables LiteLLM says `model` needs and that are unset (server URLs excluded)."""
    missing = _litellm().validate_environment(model).get("missing_keys") or []
    return [name for name in missing if not name.endswith(("_API_BASE", "_BASE_URL"))]


def check_config(config: ModelConfig) -> None:
    """Raise an LLMError naming the fix when `config` cannot work; make no network call."""
    provider, _, name = config.model.partition("/")
    if not provider or not name:
        raise LLMError(f"--model must be provider/name (a LiteLLM model string), got {config.model!r}; "
                       f"e.g. openai/gpt-4o, anthropic/claude-sonnet-4-5, or hosted_vllm/<served name> "
                       f"with --api-base http://host:port/v1")
    if provider not in _litellm().provider_list:
        raise LLMError(f"unknown provider {provider!r} in --model {config.model}; use a LiteLLM provider such as "
                       f"openai, anthropic, gemini, openrouter, hosted_vllm or ollama_chat (for any "
                       f"OpenAI-compatible server: openai/<name> with --api-base)")
    if config.api_base:
        if not config.api_base.startswith(("http://", "https://")):
            raise LLMError(f"--api-base must be an http(s) URL such as http://localhost:8000/v1, "
                           f"got {config.api_base!r}")
        return  # a local or self-hosted server: a key is optional
    missing = missing_credentials(config.model)
    if missing:
        raise LLMError(f"--model {config.model} needs credentials that are not set: {', '.join(missing)}. "
                       f"Set it in the environment (export {missing[0]}=...) or point --api-base at an "
                       f"OpenAI-compatible server (vLLM, Ollama) that needs none")


def hosted_window(model: str) -> int | None:
    """The input window LiteLLM's bundled model table gives `model`, if it knows the model."""
    try:
        info = _litellm().get_model_info(model)
    except Exception:  # noqa: BLE001 -- an unknown model: LiteLLM raises; the budget uses its default
        return None
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return window if isinstance(window, int) and window > 0 else None


def build_lm(config: ModelConfig) -> dspy.LM:
    """A DSPy LM for the config, with DSPy's cache and retries off (see the module docstring)."""
    options: dict[str, Any] = {"timeout": config.timeout_s}
    if config.api_base:
        # max_tokens on the wire, and no hidden retries in the OpenAI client (a timeout is ours to handle)
        options.update(api_base=config.api_base, engine="litellm", max_retries=0)
        if missing_credentials(config.model):
            options["api_key"] = PLACEHOLDER_KEY  # the provider client insists on some key
    if config.temperature is not None:
        options["temperature"] = config.temperature
    try:
        return dspy.LM(config.model, cache=False, num_retries=0, **options)
    except (LMError, ValueError, TypeError) as exc:  # e.g. reasoning models refuse a temperature
        raise LLMError(f"cannot configure --model {config.model}: {_first_line(exc)}") from exc


@dataclass(frozen=True)
class ModelAnswer:
    """One signature call: the output fields that could be read, the raw text, the usage, each request."""

    fields: dict[str, Any]
    raw: str
    usage: LLMUsage
    parse_error: str | None = None  # set when the answer did not follow the field format exactly
    calls: tuple[LLMCall, ...] = ()  # the requests behind it, a timed-out one included


def _raw_text(entry: dict) -> str:
    outputs = entry.get("outputs") or [""]
    first = outputs[0]
    return (first.get("text") or "") if isinstance(first, dict) else str(first or "")


def usage_of(history: list[dict]) -> LLMUsage:
    """Tokens and cost of the calls recorded in an LM history (cost None when nobody priced it)."""
    usage = LLMUsage()
    for entry in history:
        tokens = entry.get("usage") or {}
        cost = entry.get("cost")
        usage = usage + LLMUsage(calls=1, prompt_tokens=int(tokens.get("prompt_tokens") or 0),
                                 completion_tokens=int(tokens.get("completion_tokens") or 0),
                                 cost_usd=float(cost) if cost is not None else None)
    return usage


def _first_line(exc: Exception) -> str:
    text = getattr(exc, "message", "") or str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def _finish_reason(entry: dict) -> str | None:
    """`stop` or `length` from the response in a DSPy history entry (LiteLLM's or DSPy's own shape)."""
    response = entry.get("response")
    choices = getattr(response, "choices", None)
    reason = getattr(choices[0], "finish_reason", None) if choices else getattr(response, "finish_reason", None)
    return str(reason) if reason else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _is_timeout(exc: LMError) -> bool:
    return isinstance(exc, LMTimeoutError) or "timed out" in _first_line(exc).lower()


@dataclass
class ModelClient:
    """Calls DSPy signatures on one LM with retries, and counts what each call cost.

    Works with any DSPy LM, so tests and users can hand in `dspy.utils.DummyLM`.
    """

    lm: dspy.BaseLM
    retries: int = 3
    backoff_s: float = 2.0
    timeout_s: float | None = None
    api_base: str | None = None
    max_tokens: int | None = None  # a call without a fitted plan asks for this many answer tokens at most
    system_in_user: bool = False  # the server drops system messages: send their text in the user message
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def predict(self, signature: type[dspy.Signature], *, plan: Fitted | None = None,
                watch: ModelWatcher | None = None, **inputs: Any) -> ModelAnswer:
        """Call the model once (plus retries of transient failures, and one shorter retry after a timeout)
        and read the signature's outputs. `plan` (the budget's) gives the inputs and max_tokens.

        An answer that does not follow DSPy's field format is not an error here: the fields that
        are present are returned with `parse_error` set, and the caller decides what is usable.
        """
        inputs = dict(plan.inputs) if plan is not None else inputs
        call = plan.call if plan is not None else signature.__name__
        max_tokens = plan.max_tokens if plan is not None else self.max_tokens or ANSWER_TOKENS["proposal"]
        calls: list[LLMCall] = []
        asked: list[int] = []  # max_tokens of the requests that timed out
        failures = 0  # transient failures retried so far
        while True:
            lm = self.lm.copy(max_tokens=max_tokens)  # a fresh history holds exactly this call's completions
            start = time.monotonic()
            try:
                with self._waiting(watch, call, plan, max_tokens):
                    fields, raw, problem = self._once(signature, lm, inputs, self.system_in_user)
            except LMError as exc:
                if _is_timeout(exc):
                    calls.append(self._record(call, plan, max_tokens, time.monotonic() - start, None))
                    asked.append(max_tokens)
                    if len(asked) == 2:
                        raise self._timed_out(asked, calls) from exc
                    max_tokens = max(1, max_tokens // 2)
                    continue
                if not self._transient(exc) or failures == self.retries:
                    raise self._as_llm_error(exc, failures + len(asked) + 1, plan, calls) from exc
                self.sleep(self._delay(exc, failures))
                failures += 1
                continue
            entry = lm.history[-1] if lm.history else {}
            calls.append(self._record(call, plan, max_tokens, time.monotonic() - start, entry, raw))
            return ModelAnswer(fields, raw, usage_of(lm.history), problem, tuple(calls))

    @staticmethod
    def _once(signature: type[dspy.Signature], lm: dspy.BaseLM, inputs: dict,
              system_in_user: bool) -> tuple[dict, str, str | None]:
        """(fields, raw answer, parse problem or None) of one request; LMError passes through."""
        names = list(signature.output_fields)
        try:
            with dspy.context(lm=lm, adapter=chat_adapter(system_in_user), disable_history=False,
                              max_history_size=_HISTORY):
                prediction = dspy.Predict(signature)(**inputs)
            return {n: prediction[n] for n in names}, _raw_text(lm.history[-1]), None
        except AdapterParseError as exc:
            raw = exc.lm_response or ""
            found = split_fields(raw, names)
            missing = [n for n in names if n not in found]
            return found, raw, (f"missing field(s) {', '.join(missing)}" if missing
                                else "a field's value did not have the declared type")

    def _waiting(self, watch: ModelWatcher | None, call: str, plan: Fitted | None, max_tokens: int):
        if watch is None:
            return nullcontext()
        prompt = f"{plan.prompt_tokens:,} tokens in, " if plan is not None else ""
        return watch.model_call(f"{self.lm.model}: {call}, {prompt}≤{max_tokens:,} out")

    @staticmethod
    def _record(call: str, plan: Fitted | None, max_tokens: int, seconds: float, entry: dict | None,
                raw: str | None = None) -> LLMCall:
        """The request as sent (plan) and as answered (entry: a DSPy history entry, and the answer's text;
        None when it timed out)."""
        tokens = (entry or {}).get("usage") or {}
        counted = {k: _count(tokens.get(k)) for k in ("prompt_tokens", "completion_tokens")}
        measured = {} if plan is None else dict(window=plan.window, prompt_measured=plan.prompt_tokens,
                                                measured_by=plan.measured_by, parts=plan.parts,
                                                left_out=list(plan.left_out))
        return LLMCall(call=call, outcome="answered" if entry is not None else "timed out", max_tokens=max_tokens,
                       seconds=round(seconds, 3), finish_reason=_finish_reason(entry) if entry else None,
                       answer=None if raw is None else raw[:ANSWER_CHARS], **counted, **measured)

    @staticmethod
    def _transient(exc: LMError) -> bool:
        return is_retryable_lm_error(exc) or getattr(exc, "status", None) in TRANSIENT_STATUS

    def _delay(self, exc: LMError, attempt: int) -> float:
        hint = getattr(exc, "retry_after", None)
        if isinstance(hint, (int, float)) and 0 <= hint <= _MAX_RETRY_AFTER_S:
            return max(float(hint), self.backoff_s)
        return self.backoff_s * 2 ** attempt

    def _where(self) -> str:
        return f" at {self.api_base}" if self.api_base else ""

    def _timed_out(self, asked: list[int], calls: list[LLMCall]) -> LLMError:
        limit = f"within {self.timeout_s:g} s " if self.timeout_s else ""
        error = LLMError(f"{self.lm.model} gave no answer {limit}for an answer of up to {asked[0]:,} tokens, nor of "
                         f"up to {asked[1]:,}{self._where()}: raise --llm-timeout or lower --max-tokens, and check "
                         f"that the server is up and not overloaded")
        error.llm_calls = tuple(calls)
        return error

    def _as_llm_error(self, exc: LMError, attempts: int, plan: Fitted | None, calls: list[LLMCall]) -> LLMError:
        error = self._message(exc, attempts, plan)
        error.llm_calls = tuple(calls)
        return error

    def _message(self, exc: LMError, attempts: int, plan: Fitted | None) -> LLMError:
        model, where = self.lm.model, self._where()
        status = getattr(exc, "status", None)
        tries = f"{attempts} attempt{'s' if attempts > 1 else ''}"
        detail = _first_line(exc)
        if isinstance(exc, LMNotConfiguredError):
            return LLMError(f"{model} is not configured: {detail}")
        if isinstance(exc, LMAuthError) or status in (401, 403):
            return LLMError(f"the provider rejected the credentials for {model}{where} (HTTP {status}): check the "
                            f"key in the provider's environment variable (e.g. OPENAI_API_KEY, ANTHROPIC_API_KEY)")
        if isinstance(exc, ContextWindowExceededError):
            assumed = f" (this run fitted it to {plan.window:,} tokens)" if plan is not None else ""
            return LLMError(f"{model}{where} says the prompt is longer than its context window{assumed}: pass the "
                            f"window the server really has as --context-tokens N ({detail})")
        if isinstance(exc, LMUnsupportedModelError) or status == 404:
            return LLMError(f"{model} was not found{where} (HTTP {status}): check the name after the provider "
                            f"prefix in --model and the --api-base URL ({detail})")
        if status == 429:
            return LLMError(f"{model} is rate-limited (HTTP 429) on all {tries}: wait, or allow more retries "
                            f"(--llm-retries); {detail}")
        if isinstance(exc, LMTransportError) or "connection error" in detail.lower():  # LiteLLM: an HTTP 500
            return LLMError(f"cannot reach {model}{where} after {tries} ({detail}): check --api-base and that "
                            f"the server is running")
        if status is not None and status >= 500:
            return LLMError(f"the server for {model}{where} failed (HTTP {status}) on all {tries}: {detail}")
        return LLMError(f"{model}{where} refused the request (HTTP {status}): {detail}" if status else
                        f"{model}{where} failed: {type(exc).__name__}: {detail}")


def connect(config: ModelConfig, *, sleep: Callable[[float], None] = time.sleep) -> ModelClient:
    """Check the configuration (raising LLMError with the fix) and build the client; no network call."""
    check_config(config)
    return ModelClient(lm=build_lm(config), retries=config.retries, backoff_s=config.backoff_s,
                       timeout_s=config.timeout_s, api_base=config.api_base, max_tokens=config.max_tokens,
                       sleep=sleep)
