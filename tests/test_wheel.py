"""The wheel works installed: built from the checkout, installed into a fresh virtual environment outside
it, and run from a directory that is not the checkout, with the offline search and with the LLM path
against the scripted OpenAI-compatible server.

The fresh environment gets the wheel alone (`--no-deps`, no index); its dependencies are the test
environment's own, reached through a path entry (not a site directory, so the checkout's editable
install there stays inactive). The children swizzleperf starts run the fresh environment's Python,
so every module and data file they read comes from the wheel.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest
from reference_remaps import XCD_CONTIGUOUS_1D as REMAP

from swizzleperf.proposers.llm.scripted_server import ScriptedServer, chat_reply

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], cwd: Path, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    child_env = {k: v for k, v in os.environ.items()
                 if k not in ("PYTHONPATH", "SWIZZLEPERF_PROMPTS", "SWIZZLEPERF_LIBRARY", "OPENAI_API_KEY")}
    child_env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", COLUMNS="200", **env)
    return subprocess.run(args, cwd=cwd, env=child_env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("wheel")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                  "--disable-pip-version-check", "-w", str(work / "dist"), str(ROOT)], work)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (work / "dist").glob("swizzleperf-*.whl")
    venv = work / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], work)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    purelib = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        work).stdout.strip())
    (purelib / "test-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    added = _run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
                  str(wheel)], work)
    assert added.returncode == 0, added.stdout + added.stderr
    kernel = work / "project" / "softmax.py"
    kernel.parent.mkdir()
    text = (ROOT / "kernels" / "softmax.py").read_text()
    kernel.write_text(text.replace('DEFAULT_SIZE = "medium"', 'DEFAULT_SIZE = "small"')
                      .replace('CHECK_SIZES = ["tiny", "small"]', 'CHECK_SIZES = ["tiny"]'))
    return dict(work=work, venv=venv, python=python, kernel=kernel, wheel=wheel)


def test_the_wheel_holds_the_package_data(installed):
    import zipfile
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    prompts = {n.rpartition("/")[2] for n in names if n.startswith("swizzleperf/proposers/llm/prompts/")}
    assert prompts == {"goal.md", "rules.md", "loop_order.md", "hardware_multi_die.md", "hardware_shared_l2.md",
                       "hardware_overload.md"}
    assert "swizzleperf/hardware/layouts/h100.json" in names


def test_the_installed_package_is_the_wheels_not_the_checkouts(installed):
    shown = _run([str(installed["python"]), "-c", "import swizzleperf.proposers.llm.templates as t, swizzleperf; "
                  "print(swizzleperf.__file__); print(t.prompts_dir())"], installed["work"])
    assert shown.returncode == 0, shown.stderr
    package, prompts = shown.stdout.split()
    assert Path(package).is_relative_to(installed["venv"]) and Path(prompts).is_relative_to(installed["venv"])
    assert not Path(package).is_relative_to(ROOT)


def test_optimize_runs_from_the_installed_command(installed):
    project = installed["kernel"].parent
    result = _run([str(installed["venv"] / "bin" / "swizzleperf"), "optimize", str(installed["kernel"]), "-n", "2",
                   "--hardware", "mi300x", "--no-library", "--keep-going", "--workers", "1",
                   "--runs-dir", str(project / "runs")],
                  project, SWIZZLEPERF_CACHE=str(installed["work"] / "cache"))
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (project / "runs").iterdir()
    record = json.loads((run / "run.json").read_text())
    attempts = [json.loads(line) for line in (run / "attempts.jsonl").read_text().splitlines()]
    assert record["status"] == "finished" and len(attempts) == 3  # the kernel's own remap, then two proposals
    assert (run / "report.md").is_file() and (run / "best" / "remap.py").is_file()


def test_the_llm_path_reads_its_prompts_from_the_wheel(installed):
    project = installed["kernel"].parent
    analysis = "Each program reads its whole row twice and writes one chunk of it."
    reply = chat_reply(reasoning="Consecutive ids of one row land on different XCDs.", critique={},
                       approach="whole rows per XCD", why_better="each row is read by one XCD only",
                       code=f"```python\n{REMAP}```")
    answers = [chat_reply(access_pattern=analysis, sharing="The programs of one row read the same row."), reply]
    with ScriptedServer(answers, lifetime_s=300) as server:
        result = _run([str(installed["venv"] / "bin" / "swizzleperf"), "optimize", str(installed["kernel"]),
                       "-n", "1", "--hardware", "mi300x", "--no-library", "--workers", "1", "--proposer", "llm",
                       "--model", "openai/scripted", "--api-base", server.base_url, "--llm-timeout", "30",
                       "--runs-dir", str(project / "llm-runs")], project,
                      SWIZZLEPERF_CACHE=str(installed["work"] / "cache"))
        requests = list(server.requests)
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (project / "llm-runs").iterdir()
    attempts = [json.loads(line) for line in (run / "attempts.jsonl").read_text().splitlines()]
    assert [a["origin"] for a in attempts] == ["baseline", "llm"]
    assert attempts[1]["report"] is not None and attempts[1]["memory_analysis"] == (
        f"Access pattern: {analysis}\n\nSharing: The programs of one row read the same row.")
    goal = (ROOT / "swizzleperf" / "proposers" / "llm" / "prompts" / "goal.md").read_text().split("$")[0].strip()
    assert len(requests) == 2 and goal[:60] in requests[1].text
