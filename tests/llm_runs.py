"""Running `swizzleperf optimize` with an LLM in a child process, and reading the run it leaves: shared by
the scripted-server end-to-end tests and the real-model one (tests/proposers/test_llm_*)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Settings from the machine that would change what the child does.
_CLEARED = ("OPENAI_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "SWIZZLEPERF_PROMPTS",
            "SWIZZLEPERF_LIBRARY", "SWIZZLEPERF_DEBUG")


def small_softmax(directory: Path) -> Path:
    """kernels/softmax.py profiled at its small size and checked at its tiny one (seconds per attempt)."""
    text = (ROOT / "kernels/softmax.py").read_text()
    text = text.replace('DEFAULT_SIZE = "medium"', 'DEFAULT_SIZE = "small"')
    text = text.replace('CHECK_SIZES = ["tiny", "small"]', 'CHECK_SIZES = ["tiny"]')
    assert 'DEFAULT_SIZE = "small"' in text and 'CHECK_SIZES = ["tiny"]' in text
    path = directory / "softmax.py"
    path.write_text(text)
    return path


def child_env(work: Path, **env: str) -> dict[str, str]:
    """The environment of a child swizzleperf: no provider keys, a private trace cache, loopback unproxied."""
    child = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    child.update(SWIZZLEPERF_CACHE=str(work / "cache"), COLUMNS="240",
                 NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", **env)
    return child


def swizzleperf(args: list[str], work: Path, timeout_s: float = 240, cwd: Path | None = None,
                **env: str) -> subprocess.CompletedProcess:
    """`python -m swizzleperf ARGS` in `cwd` (default `work`), with child_env(work)."""
    return subprocess.run([sys.executable, "-m", "swizzleperf", *args], cwd=cwd or work, env=child_env(work, **env),
                          capture_output=True, text=True, timeout=timeout_s)


def read_run(work: Path) -> tuple[dict, list[dict]]:
    (run_dir,) = (work / "runs").iterdir()
    record = json.loads((run_dir / "run.json").read_text())
    attempts = [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
    return record, attempts


def failure(attempt: dict) -> tuple[str, str] | None:
    bad = [s for s in attempt["stages"] if not s["ok"]]
    return (bad[0]["stage"], bad[0]["detail"]) if bad else None
