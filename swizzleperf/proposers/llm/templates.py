"""The prompt texts, read at run time from plain files: the package's `prompts/` beside this module.

People tune prompts more often than code, so the words live in files anyone can edit; the
code only fills `$placeholders` (Python's `string.Template`, so braces in code examples need
no escaping). A placeholder a file uses but the code does not supply is an error that names
the file, not a silent blank.
"""

from __future__ import annotations

import os
import string
from dataclasses import dataclass
from pathlib import Path

from swizzleperf.errors import LLMError

PROMPTS_ENV = "SWIZZLEPERF_PROMPTS"
DEFAULT_DIR = Path(__file__).resolve().parent / "prompts"  # package data: installed with the wheel

# file name -> what it holds; every file must exist in a prompts directory
FILES = {
    "hardware_multi_die.md": "curated hardware text for GPUs whose L2 is split over dies (AMD XCDs)",
    "hardware_shared_l2.md": "curated hardware text for GPUs with one shared L2 (NVIDIA)",
    "hardware_overload.md": "the long, uncurated architecture text of the hardware-overload baseline",
    "goal.md": "what the model is asked to achieve",
    "rules.md": "the rules on the remap function's shape and the allowed subset of Triton",
    "loop_order.md": "for a kernel with a loop-order hook: what it is and how to rewrite it beside the remap",
}


def prompts_dir(override: str | Path | None = None) -> Path:
    """Where prompts are read from: the argument, else $SWIZZLEPERF_PROMPTS, else the package's prompts/ (DEFAULT_DIR)."""
    chosen = Path(override or os.environ.get(PROMPTS_ENV) or DEFAULT_DIR)
    missing = [name for name in FILES if not (chosen / name).is_file()]
    if missing:
        raise LLMError(f"prompt directory {chosen} lacks {', '.join(missing)}; point {PROMPTS_ENV} (or prompts_dir=) "
                       f"at a directory holding {', '.join(FILES)} (copy {DEFAULT_DIR} to start from the defaults)")
    return chosen


@dataclass(frozen=True)
class PromptSet:
    """The prompt files of one directory, read once."""

    directory: Path
    texts: dict[str, str]

    @classmethod
    def load(cls, directory: str | Path | None = None) -> "PromptSet":
        chosen = prompts_dir(directory)
        return cls(chosen, {name: (chosen / name).read_text() for name in FILES})

    def raw(self, name: str) -> str:
        return self.texts[name]

    def render(self, name: str, **values: object) -> str:
        """The file with every `$placeholder` filled; a missing value names the file and the placeholder."""
        try:
            return string.Template(self.texts[name]).substitute({k: str(v) for k, v in values.items()}).strip()
        except KeyError as exc:
            raise LLMError(f"{self.directory / name} uses the placeholder ${exc.args[0]}, which swizzleperf does not "
                           f"supply; available here: {', '.join('$' + k for k in sorted(values))}") from exc
        except ValueError as exc:  # a lone `$`
            raise LLMError(f"{self.directory / name}: {exc}; write a literal dollar sign as $$") from exc
