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
carries them as `usage` for a loop that stops on it and so never asks for a next proposal.

Modes (the paper's baselines): `aware` (curated hardware context), `unaware` (no hardware
context at all), `overload` (a long uncurated architecture text instead of the curated one).
"""

from __future__ import annotations

import re
from pathlib import Path

from swizzleperf.errors import LLMError
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.proposers.base import ProposalContext
from swizzleperf.proposers.llm.client import ModelAnswer, ModelClient, ModelConfig, connect
from swizzleperf.proposers.llm.context import (
    MODES,
    Mode,
    describe_history,
    describe_problem,
    grid_sizes,
    hardware_context,
    report_summary,
    returns_text,
)
from swizzleperf.proposers.llm.extract import Extraction, extract_hook, split_fields
from swizzleperf.proposers.llm.signatures import MemoryAnalysis, ProposeSwizzle
from swizzleperf.proposers.llm.templates import PromptSet
from swizzleperf.records.proposal import LLMUsage, Proposal
from swizzleperf.remaps.check import normalise

_APPROACH_PREFIX = re.compile(r"^\W*my new swizzling approach will remap (the )?(blocks|programs) by\s*", re.I)
_FAMILY_WORDS = 6


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
                 history_limit: int = 8):
        if mode not in MODES:
            raise LLMError(f"unknown LLM context mode {mode!r}; choose one of {', '.join(MODES)}")
        self.client = client
        self.mode: Mode = mode
        self.prompts = prompts or PromptSet.load()
        self.history_limit = history_limit
        self.memory_analysis: str | None = None
        self._analysed_kernel: str | None = None  # sha256 of the kernel the analysis describes
        self._analysis_unrecorded = False  # the analysis goes into the next proposal's rationale, once
        self.last_answer: ModelAnswer | None = None  # the latest ProposeSwizzle answer, raw text included
        self._unbilled = LLMUsage()  # usage of calls whose proposal never came back (a later call raised)

    # --- the protocol ------------------------------------------------------------------------
    def propose(self, context: ProposalContext) -> Proposal:
        kernel = context.kernel
        improved = context.best is not None and context.best != context.baseline
        hardware = hardware_context(self.mode, context.hardware.with_occupancy(kernel.programs_per_cu),
                                    context.best or context.baseline, self.prompts, kernel.hook,
                                    "the best remap so far" if improved else "the original kernel")
        try:
            self._unbilled = self._unbilled + self._ensure_memory_analysis(kernel, hardware, context.memory_analysis)
            answer = self.client.predict(
                ProposeSwizzle,
                original_code=kernel.source,
                bottleneck_report=report_summary(self.mode, context.baseline),
                memory_analysis=self.memory_analysis,
                history=describe_history(context.history, self.history_limit),
                hardware=hardware,
                goal=self.prompts.render("goal.md", kernel=kernel.name, hook_name=kernel.hook.name),
                rules=self.rules(kernel),
            )
        except LLMError as exc:
            # tokens spent before the failure, for a caller that stops here (module docstring)
            exc.usage = self._unbilled if self._unbilled.calls else None
            exc.memory_analysis = self._take_unrecorded_analysis()
            raise
        self.last_answer = answer
        usage, self._unbilled = self._unbilled + answer.usage, LLMUsage()
        return self._proposal(answer, context, usage)

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

    def _ensure_memory_analysis(self, kernel: KernelFile, hardware: str, recorded: str | None) -> LLMUsage:
        """Run the memory-analysis call once per run; its usage goes on the first proposal.

        `recorded` is the analysis an earlier attempt of this run holds (a resumed run's history):
        it is reused rather than paid for again. A resumed run's kernel is the run's kernel.
        """
        if self._analysed_kernel == kernel.sha256 and self.memory_analysis is not None:
            return LLMUsage()
        if recorded is not None and self._analysed_kernel is None:
            self.memory_analysis, self._analysed_kernel = recorded, kernel.sha256
            return LLMUsage()
        answer = self.client.predict(MemoryAnalysis, kernel_source=kernel.source,
                                     problem=describe_problem(kernel), hardware=hardware)
        pattern, sharing = _text(answer.fields.get("access_pattern")), _text(answer.fields.get("sharing"))
        if pattern or sharing:
            self.memory_analysis = f"Access pattern: {pattern}\n\nSharing: {sharing}"
        else:  # an answer outside the field format is still the model's analysis
            self.memory_analysis = answer.raw.strip() or "(the memory analysis came back empty)"
        self._analysed_kernel = kernel.sha256
        self._analysis_unrecorded = True
        return answer.usage

    def _proposal(self, answer: ModelAnswer, context: ProposalContext, usage: LLMUsage) -> Proposal:
        fields = answer.fields
        # DSPy re-joins the lines str.splitlines() gives, so a U+2028 in a comment becomes a line break;
        # the raw answer's own code section, split where Python splits lines, is the code as written.
        code = split_fields(answer.raw, ["code"]).get("code") or _text(fields.get("code"))
        # Without a code field the whole answer is searched; its last function wins.
        extraction = extract_hook(code if code else answer.raw, context.kernel.hook, context.kernel.loop_order)
        approach, why = _text(fields.get("approach")), _text(fields.get("why_better"))
        family = family_name(approach, context.iteration)
        rationale = _rationale(approach, why, fields.get("critique"), _text(fields.get("reasoning")), extraction,
                               answer.parse_error)
        error = extraction.error
        if error is None and _seen(extraction.source, context):
            # the source stays, so the history's diff shows the model what it repeated
            error = ("this remap is the same implementation as an earlier attempt (after formatting and comments "
                     "are ignored); propose a remap that differs in what it does")
        return Proposal(source=extraction.source, family=family, rationale=rationale, origin="llm", usage=usage,
                        extraction_error=error, memory_analysis=self._take_unrecorded_analysis())

    def _take_unrecorded_analysis(self) -> str | None:
        """The analysis, the first time it is asked for after the call that produced it (then None):
        the proposal carrying it is the run's record of what the model made of the kernel."""
        if not self._analysis_unrecorded:
            return None
        self._analysis_unrecorded = False
        return self.memory_analysis


def _seen(source: str, context: ProposalContext) -> bool:
    try:
        return normalise(source) in context.seen_sources
    except (SyntaxError, ValueError, RecursionError):
        return False  # unparsable text is never a repeat; the static check will say what is wrong


def _rationale(approach: str, why: str, critique: object, reasoning: str, extraction: Extraction,
               parse_error: str | None) -> str:
    """What the model said about its remap, for attempts.jsonl (the prompt shows only the diff and outcome)."""
    lines = [text for text in (approach, why) if text]
    if critique:
        lines.append("Critique of earlier attempts:\n" + _text(critique))
    if reasoning:
        lines.append("Reasoning:\n" + reasoning)
    if extraction.notes:
        lines.append("Extraction: " + "; ".join(extraction.notes) + ".")
    if parse_error:
        lines.append(f"The answer did not follow the field format exactly ({parse_error}).")
    return "\n".join(lines)


def make_llm_proposer(model: str | None, *, api_base: str | None = None, mode: str = "aware",
                      timeout_s: float = 180.0, retries: int = 3, temperature: float | None = None,
                      max_tokens: int | None = None, history_limit: int = 8,
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
                       history_limit=history_limit)
