"""The LLM proposer: the paper's hardware-aware, bottleneck-driven codegen loop, one call per step.

The first `propose()` asks the model for a memory analysis of the kernel (which programs share
which data; no code) and keeps it for the run. Every `propose()` then makes one ProposeSwizzle
call with the original code, its bottleneck report, that analysis, the bounded history, the
hardware text, the goal and the rules, and turns the answer into a Proposal.

A model answer is never trusted: the code is pulled out of it by `llm.extract` (never run),
and when nothing usable is found the Proposal carries `extraction_error`, which the loop shows
to the model as that attempt's reason. Transport failures (no key, server down after retries)
raise LLMError instead, because no later iteration can succeed without a fix. Tokens are
billed once: on the proposal they led to, or, when a call fails after an earlier one of the
same proposal succeeded (the memory analysis, say), on the next proposal; the raised LLMError
carries them as `usage` (and its requests as `llm_calls`) for a loop that stops on it and so never
asks for a next proposal.

Every call is fitted to the model's context window first (budget.py: measured, shortened in a fixed
order, its max_tokens set). Before the first call of a session the shortest prompt of each call still
to be made must fit, or ContextWindowError says why in one line and nothing is spent; the loop lets
it through as the command's error. The budget is opened at the first proposal, asking a self-hosted
server its window, tokenizer and chat template once (server_info.py), and what it found is said to
the context's watcher, which also sees each call while it runs.

Modes (the paper's baselines): `aware` (curated hardware context), `unaware` (no hardware
context at all), `overload` (a long uncurated architecture text instead of the curated one).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import dspy

from swizzleperf.errors import ContextWindowError, LLMError
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.proposers.base import ModelWatcher, ProposalContext
from swizzleperf.proposers.llm.budget import ContextBudget, Variant, open_budget
from swizzleperf.proposers.llm.client import ModelAnswer, ModelClient, ModelConfig, connect, hosted_window
from swizzleperf.proposers.llm.context import (
    MODES,
    Mode,
    describe_history,
    describe_problem,
    grid_sizes,
    hardware_context,
    hook_and_callers,
    report_summary,
    returns_text,
    select_attempts,
)
from swizzleperf.proposers.llm.extract import Extraction, extract_hook, split_fields
from swizzleperf.proposers.llm.signatures import MemoryAnalysis, ProposeSwizzle
from swizzleperf.proposers.llm.templates import PromptSet
from swizzleperf.records.proposal import LLMCall, LLMUsage, Proposal
from swizzleperf.remaps.check import normalise

_APPROACH_PREFIX = re.compile(r"^\W*my new swizzling approach will remap (the )?(blocks|programs) by\s*", re.I)
_FAMILY_WORDS = 6
LEFT_OUT = "(left out to fit the model's context window)"
CUT = "the kernel source outside the hooks and the functions that call them"


def family_name(approach: str, iteration: int) -> str:
    """A short label for the model's idea, from its approach sentence: `llm:grouping-all-chunks-of-a`."""
    words = re.findall(r"[a-z0-9]+", _APPROACH_PREFIX.sub("", approach.strip()).lower())[:_FAMILY_WORDS]
    return "llm:" + ("-".join(words) if words else f"iteration-{iteration}")


def _text(value: object) -> str:
    if isinstance(value, dict):
        return "\n".join(f"{key}: {item}" for key, item in value.items())
    return str(value or "").strip()


class LLMProposer:
    """Implements the Proposer protocol with two DSPy signatures (see the module docstring)."""

    name = "llm"

    def __init__(self, client: ModelClient, *, mode: Mode = "aware", prompts: PromptSet | None = None,
                 history_limit: int = 8, context_tokens: int | None = None):
        if mode not in MODES:
            raise LLMError(f"unknown LLM context mode {mode!r}; choose one of {', '.join(MODES)}")
        self.client = client
        self.mode: Mode = mode
        self.prompts = prompts or PromptSet.load()
        self.history_limit = history_limit
        self.context_tokens = context_tokens
        self.budget: ContextBudget | None = None  # opened at the first proposal (it may ask the server)
        self._checked = False  # whether the shortest prompts were found to fit (before this session's first call)
        self._told_format = False  # the chat-template line is said once
        self.memory_analysis: str | None = None
        self._analysed_kernel: str | None = None  # sha256 of the kernel the analysis describes
        self._analysis_unrecorded = False  # the analysis goes into the next proposal's rationale, once
        self.last_answer: ModelAnswer | None = None  # the latest ProposeSwizzle answer, raw text included
        self._unbilled = LLMUsage()  # usage of calls whose proposal never came back (a later call raised)
        self._unbilled_calls: list[LLMCall] = []

    # --- the protocol ------------------------------------------------------------------------
    def propose(self, context: ProposalContext) -> Proposal:
        kernel = context.kernel
        improved = context.best is not None and context.best != context.baseline
        hardware = hardware_context(self.mode, context.hardware.with_occupancy(kernel.programs_per_cu),
                                    context.best or context.baseline, self.prompts, kernel.hook,
                                    "the best remap so far" if improved else "the original kernel")
        budget = self._open_budget(context.watcher)
        if not self._checked:  # raises ContextWindowError before any call: one error line, nothing spent
            self._check_fits(context, hardware, budget)
        try:
            analysis = self._ensure_memory_analysis(kernel, hardware, context)
            if analysis is not None:
                self._unbilled = self._unbilled + analysis.usage
                self._unbilled_calls.extend(analysis.calls)
            plan = budget.fit("proposal", ProposeSwizzle, self._proposal_variants(context, hardware))
            self._note_counter(budget, context.watcher)
            answer = self.client.predict(ProposeSwizzle, plan=plan, watch=context.watcher)
        except LLMError as exc:
            raise self._with_spent(exc)
        except ContextWindowError as exc:  # after this proposal's first call (the analysis): recorded by the loop
            raise self._with_spent(LLMError(str(exc))) from exc
        self._check_format(answer, ProposeSwizzle, context.watcher)
        self.last_answer = answer
        usage, self._unbilled = self._unbilled + answer.usage, LLMUsage()
        calls, self._unbilled_calls = [*self._unbilled_calls, *answer.calls], []
        return self._proposal(answer, context, usage, calls)

    # --- pieces --------------------------------------------------------------------------------
    def rules(self, kernel: KernelFile) -> str:
        hook, order = kernel.hook, kernel.loop_order
        rules = self.prompts.render("rules.md", signature=hook.render(), pid=hook.pid,
                                    grid_params=", ".join(hook.grid_params), returns=returns_text(hook),
                                    grid_sizes=grid_sizes(kernel))
        if order is None:
            return rules
        return rules + "\n\n" + self.prompts.render("loop_order.md", signature=order.render(), step=order.step,
                                           n_steps=order.n_steps, local_tile=order.local_tile)

    def _open_budget(self, watch: ModelWatcher | None) -> ContextBudget:
        if self.budget is None:
            model, api_base = self.client.lm.model, self.client.api_base
            self.budget, notes = open_budget(api_base, model.partition("/")[2] or model, self.context_tokens,
                                             self.client.max_tokens, None if api_base else hosted_window(model))
            self.client.system_in_user = self.budget.system_in_user
            for line in notes:
                _note(watch, f"LLM: {line}")
        return self.budget

    def _check_fits(self, context: ProposalContext, hardware: str, budget: ContextBudget) -> None:
        """The shortest prompt of each call still to be made fits, or ContextWindowError (before any call)."""
        if self._needs_analysis(context.kernel, context.memory_analysis):
            budget.fit("memory analysis", MemoryAnalysis, self._analysis_variants(context.kernel, hardware)[-1:])
        budget.fit("proposal", ProposeSwizzle, list(self._proposal_variants(context, hardware))[-1:])
        self._checked = True

    def _proposal_variants(self, context: ProposalContext, hardware: str) -> Iterator[Variant]:
        """The ProposeSwizzle inputs, then shorter and shorter: history entries left out one by one (the
        oldest first, the best accepted one last), then the memory analysis, then the host code."""
        kernel, history = context.kernel, context.history
        full = dict(original_code=kernel.source, bottleneck_report=report_summary(self.mode, context.baseline),
                    memory_analysis=self.memory_analysis or LEFT_OUT, hardware=hardware,
                    goal=self.prompts.render("goal.md", kernel=kernel.name, hook_name=kernel.hook.name),
                    rules=self.rules(kernel))
        shown = len(select_attempts(history, self.history_limit)[0])
        for limit in range(shown, -1, -1):
            dropped = (f"{shown - limit} of {shown} history entries",) if limit < shown else ()
            yield Variant({**full, "history": describe_history(history, limit)}, dropped)
        bare = {**full, "history": describe_history(history, 0), "memory_analysis": LEFT_OUT}
        dropped = (f"{shown} of {shown} history entries",) if shown else ()
        yield Variant(bare, (*dropped, "the memory analysis"))
        yield Variant({**bare, "original_code": hook_and_callers(kernel)}, (*dropped, "the memory analysis", CUT))

    @staticmethod
    def _analysis_variants(kernel: KernelFile, hardware: str) -> list[Variant]:
        full = dict(kernel_source=kernel.source, problem=describe_problem(kernel), hardware=hardware)
        return [Variant(full), Variant({**full, "kernel_source": hook_and_callers(kernel)}, (CUT,))]

    def _needs_analysis(self, kernel: KernelFile, recorded: str | None) -> bool:
        return not (self._analysed_kernel == kernel.sha256 and self.memory_analysis is not None) and not (
            recorded is not None and self._analysed_kernel is None)

    def _ensure_memory_analysis(self, kernel: KernelFile, hardware: str,
                                context: ProposalContext) -> ModelAnswer | None:
        """Run the memory-analysis call once per run; its answer's usage goes on the first proposal.

        The analysis an earlier attempt of this run holds (a resumed run's history) is reused rather
        than paid for again. A resumed run's kernel is the run's kernel.
        """
        recorded = context.memory_analysis
        if not self._needs_analysis(kernel, recorded):
            if self._analysed_kernel is None:
                self.memory_analysis, self._analysed_kernel = recorded, kernel.sha256
            return None
        plan = self.budget.fit("memory analysis", MemoryAnalysis, self._analysis_variants(kernel, hardware))
        answer = self.client.predict(MemoryAnalysis, plan=plan, watch=context.watcher)
        self._check_format(answer, MemoryAnalysis, context.watcher)
        pattern, sharing = _text(answer.fields.get("access_pattern")), _text(answer.fields.get("sharing"))
        if pattern or sharing:
            self.memory_analysis = f"Access pattern: {pattern}\n\nSharing: {sharing}"
        else:  # an answer outside the field format is still the model's analysis
            self.memory_analysis = answer.raw.strip() or "(the memory analysis came back empty)"
        self._analysed_kernel = kernel.sha256
        self._analysis_unrecorded = True
        return answer

    def _with_spent(self, error: LLMError) -> LLMError:
        """`error`, carrying for the loop what was spent before it (module docstring)."""
        error.usage = self._unbilled if self._unbilled.calls else None
        error.llm_calls = (*self._unbilled_calls, *error.llm_calls)
        error.memory_analysis = self._take_unrecorded_analysis()
        return error

    def _check_format(self, answer: ModelAnswer, signature: type[dspy.Signature], watch: ModelWatcher | None) -> None:
        """Once per run: an answer with none of the requested fields usually means a wrong chat template."""
        if self._told_format or answer.fields or not answer.parse_error:
            return
        self._told_format = True
        asked = ", ".join(f"[[ ## {name} ## ]]" for name in signature.output_fields)
        _note(watch, f"LLM: {self.client.lm.model}'s answer has none of the requested fields ({asked}): its chat "
                     f"template may be wrong or missing (llama.cpp uses the GGUF's tokenizer.chat_template or "
                     f"--chat_format; without one it falls back to a generic format), or the model is too small "
                     f"to follow it; code in the answer is still read")

    @staticmethod
    def _note_counter(budget: ContextBudget, watch: ModelWatcher | None) -> None:
        if budget.counter.note:
            _note(watch, f"LLM: {budget.counter.note}")
            budget.counter.note = None

    def _proposal(self, answer: ModelAnswer, context: ProposalContext, usage: LLMUsage,
                  calls: list[LLMCall]) -> Proposal:
        fields = answer.fields
        # DSPy re-joins the lines str.splitlines() gives, so a U+2028 in a comment becomes a line break;
        # the raw answer's own code section, split where Python splits lines, is the code as written.
        code = split_fields(answer.raw, ["code"]).get("code") or _text(fields.get("code"))
        # Without a code field the whole answer is searched; its last function wins.
        extraction = extract_hook(code if code else answer.raw, context.kernel.hook, context.kernel.loop_order)
        approach, why = _text(fields.get("approach")), _text(fields.get("why_better"))
        family = family_name(approach, context.iteration)
        last = answer.calls[-1] if answer.calls else None
        problems = [f"The answer did not follow the field format exactly ({answer.parse_error})."
                    if answer.parse_error else "",
                    f"The answer was cut at max_tokens ({last.max_tokens:,})."
                    if last is not None and last.finish_reason == "length" else ""]
        rationale = _rationale(approach, why, fields.get("critique"), _text(fields.get("reasoning")), extraction,
                               [p for p in problems if p])
        error = extraction.error
        if error is None and _seen(extraction.source, context):
            # the source stays, so the history's diff shows the model what it repeated
            error = ("this remap is the same implementation as an earlier attempt (after formatting and comments "
                     "are ignored); propose a remap that differs in what it does")
        return Proposal(source=extraction.source, family=family, rationale=rationale, origin="llm", usage=usage,
                        extraction_error=error, memory_analysis=self._take_unrecorded_analysis(), llm_calls=calls)

    def _take_unrecorded_analysis(self) -> str | None:
        """The analysis, the first time it is asked for after the call that produced it (then None):
        the proposal carrying it is the run's record of what the model made of the kernel."""
        if not self._analysis_unrecorded:
            return None
        self._analysis_unrecorded = False
        return self.memory_analysis


def _note(watch: ModelWatcher | None, line: str) -> None:
    if watch is not None:
        watch.model_note(line)


def _seen(source: str, context: ProposalContext) -> bool:
    try:
        return normalise(source) in context.seen_sources
    except (SyntaxError, ValueError, RecursionError):
        return False  # unparsable text is never a repeat; the static check will say what is wrong


def _rationale(approach: str, why: str, critique: object, reasoning: str, extraction: Extraction,
               problems: list[str]) -> str:
    """What the model said about its remap, for attempts.jsonl (the prompt shows only the diff and outcome)."""
    lines = [text for text in (approach, why) if text]
    if critique:
        lines.append("Critique of earlier attempts:\n" + _text(critique))
    if reasoning:
        lines.append("Reasoning:\n" + reasoning)
    if extraction.notes:
        lines.append("Extraction: " + "; ".join(extraction.notes) + ".")
    return "\n".join(lines + problems)


def make_llm_proposer(model: str | None, *, api_base: str | None = None, mode: str = "aware",
                      timeout_s: float = 180.0, retries: int = 3, temperature: float | None = None,
                      max_tokens: int | None = None, context_tokens: int | None = None, history_limit: int = 8,
                      prompts_dir: str | Path | None = None) -> LLMProposer:
    """The LLM proposer for the CLI, checked before the loop starts (raises LLMError naming the fix).

    No network call is made here: a missing key, an unknown provider or a bad --api-base fail
    now, with the environment variable or flag to set.
    """
    if not model:
        raise LLMError("the LLM proposer needs --model provider/name, e.g. --model openai/gpt-4o, or "
                       "--model hosted_vllm/<served name> --api-base http://localhost:8000/v1")
    if mode not in MODES:
        raise LLMError(f"unknown LLM context mode {mode!r}; choose one of {', '.join(MODES)}")
    config = ModelConfig(model=model, api_base=api_base, timeout_s=timeout_s, retries=retries,
                         temperature=temperature, max_tokens=max_tokens)
    return LLMProposer(connect(config), mode=mode, prompts=PromptSet.load(prompts_dir),
                       history_limit=history_limit, context_tokens=context_tokens)
