"""The README's Python example runs as written and prints what its comment says."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_python_example_runs_and_prints_what_it_says(tmp_path, monkeypatch):
    block = re.search(r"## From Python\n\n```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    shutil.copytree(ROOT / "kernels", tmp_path / "kernels")
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "README.md", "exec"), {})
    first, *rest = printed.getvalue().splitlines()
    promised = re.search(r"# (.+)$", block.splitlines()[4]).group(1)
    assert first == promised
    assert "@triton.jit" in "\n".join(rest) and (tmp_path / "runs").is_dir()
