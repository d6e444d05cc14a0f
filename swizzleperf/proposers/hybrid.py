"""Hybrid: the LLM invents, the search refines the family of its best idea between LLM calls.

An LLM's remap is free-form code, so "its family" is found by behaviour, not by name: the
family instance whose placement of logical programs on dies agrees most with the LLM's best
remap (same-die-or-not over pairs of nearby logical ids). The search then proposes that
instance's untried neighbours. When that instance runs exactly the LLM's permutation, it is
skipped: measuring it again would repeat the LLM's attempt under another name. Turns
alternate: LLM, then search, then LLM...
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from swizzleperf.hardware.dispatch import slot_domains
from swizzleperf.hardware.spec import hook_constants
from swizzleperf.proposers.base import ProposalContext, Proposer
from swizzleperf.proposers.search import SearchProposer
from swizzleperf.records.proposal import Proposal
from swizzleperf.remaps.check import normalise
from swizzleperf.remaps.evaluate.evaluator import evaluate
from swizzleperf.remaps.families import FamilyInstance
from swizzleperf.remaps.space import candidate_space
from swizzleperf.validation.bijectivity import logical_ids

_STRIDES = (1, 2, 4, 8, 16, 32, 64, 128)


def die_of_logical(logical_of_slot: np.ndarray, domain_of_slot: np.ndarray) -> np.ndarray:
    die = np.empty_like(domain_of_slot)
    die[logical_of_slot] = domain_of_slot
    return die


def colocation_agreement(a: np.ndarray, b: np.ndarray, strides: tuple[int, ...]) -> float:
    """How often two placements agree on whether logical ids l and l+s share a die (1.0 = same)."""
    scores = [np.mean((a[:-s] == a[s:]) == (b[:-s] == b[s:])) for s in strides if s < a.size]
    return float(np.mean(scores)) if scores else 1.0


@dataclass(frozen=True)
class FamilyMatch:
    """The family instance closest to an LLM remap, and whether it is the very same permutation."""

    instance: FamilyInstance
    identical: bool


class HybridProposer:
    name = "hybrid"

    def __init__(self, llm: Proposer, search: SearchProposer):
        self.llm = llm
        self.search = search
        self._matched: dict[str, FamilyMatch] = {}

    def propose(self, context: ProposalContext) -> Proposal | None:
        attempts = [v for v in context.every_attempt if v.origin in ("llm", "search")]
        llm_best = self._best_llm(context)
        if attempts and attempts[-1].origin == "llm" and llm_best is not None:
            match = self._family_of(context, llm_best)
            anchor, seen = match.instance, context.seen_sources
            if match.identical:  # already measured as the LLM's attempt: refine its neighbours
                seen = seen | {normalise(anchor.render(context.kernel.hook))}
            why = (f"refining the family closest to the LLM's best remap (iteration {llm_best[0]}): {anchor.label}"
                   + (" (the same permutation; trying its neighbours)" if match.identical else ""))
            proposal = self.search.refine(replace(context, seen_sources=seen), anchor, why)
            if proposal is not None:
                return proposal
        return self.llm.propose(context)

    def _best_llm(self, context: ProposalContext) -> tuple[int, str] | None:
        """(iteration, source) of the best accepted LLM attempt."""
        best = max((v for v in context.every_attempt if v.origin == "llm" and v.accepted and v.hit_pct is not None),
                   key=lambda v: v.hit_pct, default=None)
        return None if best is None else (best.iteration, best.source)

    def _family_of(self, context: ProposalContext, llm_best: tuple[int, str]) -> FamilyMatch:
        """Compared at the size the run profiles (the baseline report's), where the hit rates come from."""
        _, source = llm_best
        if source in self._matched:
            return self._matched[source]
        kernel, hw = context.kernel, context.hardware
        grid = kernel.grid(context.baseline.size)
        consts = hook_constants(kernel, hw)
        domains = slot_domains(int(np.prod(grid)), hw)
        # The LLM's code is untrusted: evaluated in a child. Family instances are our own code.
        llm_order = logical_ids(kernel.remap_of(source), kernel.hook, grid, consts)
        target = die_of_logical(llm_order, domains)
        strides = tuple(sorted({*_STRIDES, *grid[1:]}))
        best_score, best = -1.0, None
        for instances in candidate_space(kernel.hook, hw).values():
            for inst in instances:
                coords = evaluate(inst.render(kernel.hook), kernel.hook, grid, consts)
                flat = np.ravel_multi_index(tuple(coords.T), grid)
                score = colocation_agreement(target, die_of_logical(flat, domains), strides)
                if score > best_score:
                    best_score, best = score, FamilyMatch(inst, identical=bool(np.array_equal(flat, llm_order)))
        assert best is not None
        self._matched[source] = best
        return best
