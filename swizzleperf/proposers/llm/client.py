"""The model client: configuration checked before the loop starts, calls with retries, accounting.

Any LiteLLM provider string works (`openai/gpt-4o`, `anthropic/...`, `hosted_vllm/...` or any
model behind an OpenAI-compatible `api_base`). Keys come from the provider's usual environment
variable and are never taken on the command line. `connect()` checks all of it up front and
raises an `LLMError` that names the variable or flag to set, so a run never dies at iteration
one over a missing key.

DSPy's response cache is off for every LM built here: a repeated prompt (an identical history
after a rejected attempt, say) must reach the model again, not replay the last answer with no
usage. DSPy's own retries are off too; this module retries transient failures (HTTP 429 and
5xx, timeouts, dropped connections) with exponential backoff and turns everything else into
one clear `LLMError`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from swizzleperf.errors import LLMError
from swizzleperf.proposers.llm.extract import split_fields
from swizzleperf.records.proposal import LLMUsage

# LiteLLM downloads a model price list from GitHub when it is imported unless told to use its
# bundled copy; without network that costs seconds of retries on every run.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402  (after the environment default above)
from dspy.utils.exceptions import (  # noqa: E402
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
    max_tokens: int | None = Field(None, gt=0)


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


def build_lm(config: ModelConfig) -> dspy.LM:
    """A DSPy LM for the config, with DSPy's cache and retries off (see the module docstring)."""
    options: dict[str, Any] = {"timeout": config.timeout_s}
    if config.api_base:
        options["api_base"] = config.api_base
        if missing_credentials(config.model):
            options["api_key"] = PLACEHOLDER_KEY  # the provider client insists on some key
    if config.temperature is not None:
        options["temperature"] = config.temperature
    if config.max_tokens is not None:
        options["max_tokens"] = config.max_tokens
    try:
        return dspy.LM(config.model, cache=False, num_retries=0, **options)
    except (LMError, ValueError, TypeError) as exc:  # e.g. reasoning models refuse a temperature
        raise LLMError(f"cannot configure --model {config.model}: {_first_line(exc)}") from exc


@dataclass(frozen=True)
class ModelAnswer:
    """One signature call: the output fields that could be read, the raw text, the usage."""

    fields: dict[str, Any]
    raw: str
    usage: LLMUsage
    parse_error: str | None = None  # set when the answer did not follow the field format exactly


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
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    def predict(self, signature: type[dspy.Signature], **inputs: Any) -> ModelAnswer:
        """Call the model once (plus retries of transient failures) and read the signature's outputs.

        An answer that does not follow DSPy's field format is not an error here: the fields that
        are present are returned with `parse_error` set, and the caller decides what is usable.
        """
        names = list(signature.output_fields)
        predictor = dspy.Predict(signature)
        lm = self.lm.copy()  # a fresh history holds exactly this call's completions
        # No JSON fallback: it would be a second paid call; a loose answer is read by split_fields.
        adapter = dspy.ChatAdapter(use_json_adapter_fallback=False)
        for attempt in range(self.retries + 1):
            try:
                with dspy.context(lm=lm, adapter=adapter, disable_history=False, max_history_size=_HISTORY):
                    prediction = predictor(**inputs)
                return ModelAnswer({n: prediction[n] for n in names}, _raw_text(lm.history[-1]), usage_of(lm.history))
            except AdapterParseError as exc:
                raw = exc.lm_response or ""
                found = split_fields(raw, names)
                missing = [n for n in names if n not in found]
                problem = (f"missing field(s) {', '.join(missing)}" if missing
                           else "a field's value did not have the declared type")
                return ModelAnswer(found, raw, usage_of(lm.history), parse_error=problem)
            except LMError as exc:
                if not self._transient(exc) or attempt == self.retries:
                    raise self._as_llm_error(exc, attempt + 1) from exc
                self.sleep(self._delay(exc, attempt))
        raise AssertionError("unreachable: the last attempt returns or raises")

    @staticmethod
    def _transient(exc: LMError) -> bool:
        return is_retryable_lm_error(exc) or getattr(exc, "status", None) in TRANSIENT_STATUS

    def _delay(self, exc: LMError, attempt: int) -> float:
        hint = getattr(exc, "retry_after", None)
        if isinstance(hint, (int, float)) and 0 <= hint <= _MAX_RETRY_AFTER_S:
            return max(float(hint), self.backoff_s)
        return self.backoff_s * 2 ** attempt

    def _as_llm_error(self, exc: LMError, attempts: int) -> LLMError:
        model = self.lm.model
        where = f" at {self.api_base}" if self.api_base else ""
        status = getattr(exc, "status", None)
        tries = f"{attempts} attempt{'s' if attempts > 1 else ''}"
        detail = _first_line(exc)
        if isinstance(exc, LMNotConfiguredError):
            return LLMError(f"{model} is not configured: {detail}")
        if isinstance(exc, LMAuthError) or status in (401, 403):
            return LLMError(f"the provider rejected the credentials for {model}{where} (HTTP {status}): check the "
                            f"key in the provider's environment variable (e.g. OPENAI_API_KEY, ANTHROPIC_API_KEY)")
        if isinstance(exc, ContextWindowExceededError):
            return LLMError(f"the prompt is longer than {model}'s context window: show fewer attempts "
                            f"(history_limit) or use a model with a longer context")
        if isinstance(exc, LMUnsupportedModelError) or status == 404:
            return LLMError(f"{model} was not found{where} (HTTP {status}): check the name after the provider "
                            f"prefix in --model and the --api-base URL ({detail})")
        if isinstance(exc, LMTimeoutError) or "timed out" in detail.lower():
            limit = f"within {self.timeout_s:g} s " if self.timeout_s else ""
            return LLMError(f"{model} gave no answer {limit}on {tries}{where}: raise the timeout (--llm-timeout) "
                            f"or check that the server is up and not overloaded")
        if status == 429:
            return LLMError(f"{model} is rate-limited (HTTP 429) on all {tries}: wait, or allow more retries "
                            f"(--llm-retries); {detail}")
        if isinstance(exc, LMTransportError):
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
                       timeout_s=config.timeout_s, api_base=config.api_base, sleep=sleep)
