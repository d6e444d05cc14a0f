"""A run directory written before the package's floor plan changed (commit 652bc53: the kernel's own remap
and four search attempts on kernels/softmax.py at size small, mi300x, stopped by Ctrl-C) resumes with
today's code: file formats did not change with the layout. Recorded with that commit installed from its
wheel; tests/fixtures/runs/README.md says how."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "fixtures" / "runs" / "before-the-floor-plan"


def test_a_run_recorded_before_the_move_resumes_and_keeps_its_attempts(tmp_path):
    kernel = tmp_path / "kernels" / "softmax.py"
    kernel.parent.mkdir()
    shutil.copy(ROOT / "kernels" / "softmax.py", kernel)
    run = tmp_path / "runs" / "20261128-083615-softmax"
    run.mkdir(parents=True)
    record = json.loads((RECORDED / "run.json").read_text())
    assert record["status"] == "interrupted" and record["kernel"]["sha256"] == \
        "5138ed497a214f3fc2840846ba0a93f75bdf0b798b88922b8e15712a187b9477"
    record["kernel"]["path"] = str(kernel)  # recorded under /tmp/resume; the same file, the same hash
    (run / "run.json").write_text(json.dumps(record))
    shutil.copy(RECORDED / "attempts.jsonl", run / "attempts.jsonl")
    before = (RECORDED / "attempts.jsonl").read_text().splitlines()

    result = subprocess.run([sys.executable, "-m", "swizzleperf", "optimize", "--resume", str(run)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600,
                            env={**_user_environment(), "SWIZZLEPERF_CACHE": str(tmp_path / "cache")})
    assert result.returncode == 0, result.stdout + result.stderr
    after = (run / "attempts.jsonl").read_text().splitlines()
    assert after[:len(before)] == before and len(before) == 5 and len(after) == 6
    families = [json.loads(line)["family"] for line in after[len(before):]]
    # the search goes on where it stopped, and then has no order left that is new on 256 programs: chunk=32 is
    # xcd_contiguous's (tried), chunk=64 and up the kernel's own
    assert families == ["xcd_chunked(chunk=16)"]
    assert json.loads((run / "run.json").read_text())["status"] == "finished"
    assert (run / "report.md").is_file() and (run / "best" / "remap.py").is_file()


def _user_environment() -> dict[str, str]:
    """This environment without the settings that would change what the resumed run reads."""
    return {k: v for k, v in os.environ.items() if k not in ("SWIZZLEPERF_LIBRARY", "SWIZZLEPERF_DEBUG")}
