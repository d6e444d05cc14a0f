"""The proposers `--proposer NAME` can name, and how each is built from a run's settings.

Each entry builds its proposer from the seed and the LLM options a run records (model, api_base,
mode, timeout_s, retries, context_tokens, max_tokens), so a resumed run rebuilds the proposer it started
with (with the options `--resume` was given to replace: workflows/optimize.py). Built-ins register
here; factories import their module only when chosen (the LLM one pulls in DSPy). A new proposer is
one module with a class that follows `base.Proposer` and one `register(...)` call (docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from swizzleperf.errors import RunError
from swizzleperf.proposers.base import Proposer


@dataclass(frozen=True)
class ProposerEntry:
    name: str
    build: Callable[[int, dict], Proposer]  # (seed, options) -> proposer
    asks_model: bool = False                 # whether --model means anything to it


PROPOSERS: dict[str, ProposerEntry] = {}


def register(entry: ProposerEntry) -> ProposerEntry:
    if entry.name in PROPOSERS:
        raise ValueError(f"proposer {entry.name} is registered twice")
    PROPOSERS[entry.name] = entry
    return entry


def resolve_proposer(requested: str | None, model: str | None) -> tuple[str, str | None]:
    """The proposer to use, and a line to print when it is not what was literally asked for."""
    if requested is None:
        if model:
            return "llm", f"--model {model} without --proposer: using --proposer llm"
        return "search", None
    if requested in PROPOSERS and not PROPOSERS[requested].asks_model and model:
        return requested, f"--proposer {requested} asks no model: --model {model} is not used"
    return requested, None


def make_proposer(name: str, seed: int, options: dict) -> Proposer:
    """The proposer by name, behind the library warm start when options name a library.

    `options` holds model, api_base, mode, timeout_s, retries, context_tokens, max_tokens (LLM) and library
    (a directory).
    """
    if name not in PROPOSERS:
        names = list(PROPOSERS)
        raise RunError(f"unknown proposer '{name}': use {', '.join(names[:-1])} or {names[-1]}")
    proposer = PROPOSERS[name].build(seed, options)
    if options.get("library"):
        from swizzleperf.proposers.warmstart import WarmStart
        from swizzleperf.remaps.library import Library
        entries = Library(Path(options["library"])).entries()
        if entries:
            return WarmStart(entries, proposer)
    return proposer


def _search(seed: int, options: dict) -> Proposer:
    from swizzleperf.proposers.search import SearchProposer
    return SearchProposer(seed=seed)


def _llm(seed: int, options: dict) -> Proposer:
    from swizzleperf.proposers.llm.proposer import make_llm_proposer
    return make_llm_proposer(options.get("model"), api_base=options.get("api_base"), mode=options.get("mode", "aware"),
                             timeout_s=options.get("timeout_s", 180.0), retries=options.get("retries", 3),
                             context_tokens=options.get("context_tokens"), max_tokens=options.get("max_tokens"))


def _hybrid(seed: int, options: dict) -> Proposer:
    from swizzleperf.proposers.hybrid import HybridProposer
    return HybridProposer(_llm(seed, options), _search(seed, options))


register(ProposerEntry("search", _search))
register(ProposerEntry("llm", _llm, asks_model=True))
register(ProposerEntry("hybrid", _hybrid, asks_model=True))
