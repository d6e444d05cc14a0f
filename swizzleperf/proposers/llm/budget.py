"""The context budget: every prompt and the answer it asks for fit the model's context window.

The window is `--context-tokens` when given, else what the server says (server_info), else
LiteLLM's table for a hosted model, else DEFAULT_WINDOW, and the run says which. Each call reserves
room for its answer (ANSWER_TOKENS, or `--max-tokens`), sent as the request's max_tokens; the
prompt gets the rest. Prompts are measured as DSPy's chat adapter will send them, with the model's
tokenizer where the server has one, else estimated at ESTIMATE_CHARS_PER_TOKEN characters a token
(and called an estimate), plus TEMPLATE_TOKENS per message for the chat template's markers.

A prompt too long for its room is shortened, in the order of the `Variant`s the proposer gives
(oldest history entries, then the memory analysis, then the kernel source outside the remap hook
and its callers). When even the shortest leaves less than the full answer budget, max_tokens is
lowered to what is left; when that is under MIN_ANSWER_TOKENS the call cannot be made:
ContextWindowError, whose one line names the window, where it came from, and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import dspy

from swizzleperf.errors import ContextWindowError
from swizzleperf.proposers.llm.adapter import chat_adapter
from swizzleperf.proposers.llm.server_info import ServerFacts, ServerReplyError, Tokenizer, probe

DEFAULT_WINDOW = 8192  # when nobody says: a window most current local models (and Ollama's -c 8192) have
ANSWER_TOKENS = {"memory analysis": 1024, "proposal": 2048}  # per call, unless --max-tokens
MIN_ANSWER_TOKENS = 256  # a remap and a sentence of reasoning
TEMPLATE_TOKENS = 8  # per message: the chat template's role and turn markers
# Conservative: gemma-3's tokenizer measured 2.7-3.0 characters a token on the kernel files and 3.5-4.4 on
# the prompt texts (docs/measurements/llm-local-2026-11-28.md); GPT-4's runs longer.
ESTIMATE_CHARS_PER_TOKEN = 2.5


@dataclass(frozen=True)
class Window:
    tokens: int
    source: str  # where the number came from, for the run's notes and errors


def resolve_window(context_tokens: int | None, facts: ServerFacts, hosted_window: int | None) -> Window:
    """The window a run fits its prompts to, and where it came from (see the module docstring)."""
    if context_tokens:
        said = f"; the server says {facts.window:,}" if facts.window and facts.window != context_tokens else ""
        return Window(context_tokens, f"--context-tokens{said}")
    if facts.window:
        return Window(facts.window, f"the server ({facts.window_from})")
    if hosted_window:
        return Window(hosted_window, "LiteLLM's model table")
    return Window(DEFAULT_WINDOW, "a default: the server does not say its window, --context-tokens sets it")


class TokenCounter:
    """Counts tokens with the server's tokenizer (each distinct text once), else estimates them.

    A tokenizer that stops answering mid-run is dropped for the estimate, and `note` says so once."""

    def __init__(self, tokenizer: Tokenizer | None):
        self.tokenizer = tokenizer
        self.note: str | None = None
        self._seen: dict[str, int] = {}

    @property
    def label(self) -> str:
        if self.tokenizer is not None:
            return self.tokenizer.label
        return f"an estimate of {ESTIMATE_CHARS_PER_TOKEN:g} characters a token"

    def count(self, text: str) -> int:
        if text in self._seen:
            return self._seen[text]
        n = None
        if self.tokenizer is not None:
            try:
                n = self.tokenizer.count(text)
            except ServerReplyError as exc:
                self.note = f"the server's tokenizer stopped answering ({exc}); prompts are estimated from now on"
                self.tokenizer, self._seen = None, {}
        if n is None:
            n = math.ceil(len(text) / ESTIMATE_CHARS_PER_TOKEN)
        self._seen[text] = n
        return n


@dataclass(frozen=True)
class Variant:
    """One way of filling a signature's inputs, and what it leaves out (in words) compared to the full one."""

    inputs: dict[str, str]
    left_out: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fitted:
    """A call that fits: its inputs, its measured prompt, the max_tokens it may ask for."""

    call: str
    inputs: dict[str, str]
    prompt_tokens: int
    max_tokens: int
    window: int
    measured_by: str
    left_out: tuple[str, ...] = ()
    parts: dict[str, int] = field(default_factory=dict)


@dataclass
class ContextBudget:
    """One run's window, token counter and answer budgets: fits each call (see the module docstring)."""

    window: Window
    counter: TokenCounter
    max_tokens: int | None = None  # --max-tokens: the answer budget of every call
    system_in_user: bool = False  # the server drops system messages: the adapter moves them (adapter.py)

    def answer_tokens(self, call: str) -> int:
        return self.max_tokens or ANSWER_TOKENS[call]

    def measure(self, signature: type[dspy.Signature], inputs: dict[str, str]) -> int:
        """The prompt's tokens as the chat adapter sends it, chat-template allowance included."""
        messages = chat_adapter(self.system_in_user).format(signature, demos=[], inputs=inputs)
        return sum(self.counter.count(str(m.get("content") or "")) + TEMPLATE_TOKENS for m in messages)

    def fit(self, call: str, signature: type[dspy.Signature], variants: Iterable[Variant]) -> Fitted:
        """The first variant whose prompt leaves the full answer budget, else the last one with a lowered
        max_tokens; ContextWindowError when even that leaves less than MIN_ANSWER_TOKENS."""
        want, last = self.answer_tokens(call), None
        for variant in variants:
            last = variant, self.measure(signature, variant.inputs)
            if last[1] + want <= self.window.tokens:
                break
        if last is None:
            raise ValueError(f"no prompt variant was given for the {call} call")
        variant, tokens = last
        room = min(want, self.window.tokens - tokens)
        if room < min(MIN_ANSWER_TOKENS, want):
            raise ContextWindowError(self._no_room(call, tokens, variant))
        parts = {name: self.counter.count(str(value)) for name, value in variant.inputs.items()}
        return Fitted(call, variant.inputs, tokens, room, self.window.tokens, self.counter.label,
                      variant.left_out, parts)

    def _no_room(self, call: str, tokens: int, variant: Variant) -> str:
        shortened = f" even without {', '.join(variant.left_out)}" if variant.left_out else ""
        fix = ("start the server with a larger context (llama.cpp: -c N, llama-cpp-python: --n_ctx N)"
               if self.window.source.startswith("the server") else
               "pass the model's real window as --context-tokens N, or serve it with a larger context")
        answer = min(MIN_ANSWER_TOKENS, self.answer_tokens(call))
        return (f"the {call} prompt needs {tokens:,} tokens{shortened} (measured with {self.counter.label}); with "
                f"{answer:,} for the answer that is more than the model's context window of {self.window.tokens:,} "
                f"tokens ({self.window.source}): {fix}")


def open_budget(api_base: str | None, served_name: str, context_tokens: int | None, max_tokens: int | None,
                hosted_window: int | None) -> tuple[ContextBudget, list[str]]:
    """The run's budget (asking the server at `api_base`, if any, once) and lines saying what it rests on."""
    facts = probe(api_base, served_name) if api_base else ServerFacts()
    window = resolve_window(context_tokens, facts, None if api_base else hosted_window)
    budget = ContextBudget(window, TokenCounter(facts.tokenizer), max_tokens, facts.drops_system)
    head = (f"context window {window.tokens:,} tokens ({window.source}); prompts measured with "
            f"{budget.counter.label}")
    return budget, [head, *facts.notes]
