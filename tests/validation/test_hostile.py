"""Issue 13's hostile corpus (tests/hostile_corpus.py) through `swizzleperf check --remap` and the API.

Each hostile file is refused on one line naming the stage, with exit code 1 and no traceback;
each valid file with an unusual byte (a BOM, a form feed, U+2028) is accepted; a check that could
not run exits 2. The checked text is the hook Python would run, in remap files and kernel files.
"""

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_corpus import HEAD, HOSTILE, VALID, hook

from swizzleperf.cli.main import main
from swizzleperf.errors import RemapRejected
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.proposers.llm.extract import extract_hook
from swizzleperf.remaps import check as remap

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def softmax(tmp_path_factory) -> Path:
    """kernels/softmax.py checked at its tiny size only (a few seconds per accepted remap)."""
    text = (ROOT / "kernels/softmax.py").read_text().replace('CHECK_SIZES = ["tiny", "small"]', 'CHECK_SIZES = ["tiny"]')
    path = tmp_path_factory.mktemp("hostile") / "softmax.py"
    path.write_text(text)
    return path


@pytest.fixture()
def check(monkeypatch, capsys, tmp_path):
    """`swizzleperf check KERNEL [--remap FILE]` through the real entry point: (exit code, output lines)."""
    monkeypatch.setenv("COLUMNS", "2000")  # one reason, one line, whatever its length

    def run(kernel: Path, remap_bytes: bytes | None = None, remap_path: Path | None = None) -> tuple[int, list[str]]:
        args = ["swizzleperf", "check", str(kernel), "--hardware", "mi300x", "--seeds", "1"]
        if remap_bytes is not None:
            remap_path = tmp_path / "remap.py"
            remap_path.write_bytes(remap_bytes)
        if remap_path is not None:
            args += ["--remap", str(remap_path)]
        monkeypatch.setattr("sys.argv", args)
        with pytest.raises(SystemExit) as exit_info:
            main()
        captured = capsys.readouterr()
        assert "Traceback" not in captured.out + captured.err
        return exit_info.value.code, captured.out.splitlines()
    return run


def rejection(lines: list[str], stage: str) -> str:
    """The one line that says why, after checking the verdict names the same stage."""
    assert lines[-1] == f"REJECTED at {stage}", lines[-3:]
    failed = [line for line in lines if line.startswith("✗")]
    assert len(failed) == 1 and failed[0].startswith(f"✗ {stage}: "), failed
    return failed[0]


@pytest.mark.parametrize("source, stage, fragment", [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_a_hostile_remap_file_is_rejected_on_one_line(check, softmax, source, stage, fragment):
    code, lines = check(softmax, source)
    assert code == 1
    reason = rejection(lines, stage)
    assert fragment in reason
    assert len(reason) < 800  # candidate text is echoed clipped, with its length


def test_an_echo_of_candidate_text_is_clipped_and_says_how_long_it_was(check, softmax):
    code, lines = check(softmax, hook("return " + "a" * 18_000).encode())
    reason = rejection(lines, "static")
    assert "aaaa… (18,000 characters)` is not defined" in reason and len(reason) < 400


@pytest.mark.parametrize("source", [c[1] for c in VALID], ids=[c[0] for c in VALID])
def test_a_valid_remap_with_unusual_bytes_is_accepted(check, softmax, source):
    code, lines = check(softmax, source)
    assert code == 0, lines
    assert lines[-1] == "OK: the remap is safe to use with this kernel"


def test_the_decoy_is_not_what_gets_checked(softmax, tmp_path):
    """Cut by str.splitlines(), the decoy file yields the bijective hook inside the string."""
    from hostile_corpus import DECOY

    from swizzleperf.cli.main import _remap_from_file
    path = tmp_path / "decoy.py"
    path.write_text(DECOY)
    kernel = load_kernel(softmax)
    cut = _remap_from_file(path, kernel)
    assert cut == HEAD + "    return 0\n"
    wrong = "".join(DECOY.splitlines(keepends=True)[7:10])  # the same line numbers, split the other way
    assert wrong == HEAD + "    return pid\n"


def test_a_kernel_file_with_a_bom_form_feeds_and_separators_keeps_its_own_hook(check, tmp_path):
    text = (ROOT / "kernels/softmax.py").read_text().replace('CHECK_SIZES = ["tiny", "small"]', 'CHECK_SIZES = ["tiny"]')
    start = text.index("@triton.jit\ndef swizzle(")
    end = text.index("\n\n\n", start) + 1
    original_hook = text[start:end]
    awkward = '"""Decoy:\u2028\u2028\u2028\n' + HEAD + '    return 0\n"""\n# page\x0cbreak, line\u2028separator\n'
    path = tmp_path / "softmax.py"
    path.write_bytes(("\ufeff" + text[:start] + awkward + text[start:]).encode())
    kernel = load_kernel(path)
    assert kernel.hook_source == original_hook
    replaced = kernel.with_hook(hook("return num_pids - 1 - pid"))
    assert replaced == text[:start] + awkward + hook("return num_pids - 1 - pid") + text[end:]
    code, lines = check(path)
    assert code == 0 and lines[-1] == "OK: the remap is safe to use with this kernel", lines


def test_a_huge_remap_file_is_refused_without_being_read(check, softmax, tmp_path):
    sparse = tmp_path / "huge.py"
    with open(sparse, "wb") as handle:
        handle.truncate(2 * 1024 ** 3)  # 2 GB of holes: reading it whole would show in the peak memory
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code, lines = check(softmax, remap_path=sparse)
    assert code == 1 and "the remap file is 2,147,483,648 bytes; the limit is 262,144" in rejection(lines, "static")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KB: far from 2 GB


@pytest.mark.parametrize("body", [
    # 150 live int64 values: 1.2 GB on the ~1M-program grid at once, 40 MB in the evaluator's chunks
    "a0 = pid.to(tl.int64) + 1\n" + "".join(f"a{i} = a{i - 1} + 1\n" for i in range(1, 150))
    + "return (a149 - a0 - 149).to(tl.int32) + pid",
    # 90 chained conditional expressions (2.3 KB): each level's operands live at once
    "return " + "".join(f"(pid if pid < {10 ** 9 + i} else " for i in range(90)) + "pid" + ")" * 90,
])
def test_a_deep_valid_remap_is_evaluated_in_chunks_not_refused_for_memory(check, softmax, body):
    code, lines = check(softmax, hook(body).encode())
    passed = [line for line in lines if line.startswith("✓ bijectivity: bijective on all")]
    assert passed and "proven bijective for all grid sizes" in passed[0], lines


def test_a_check_that_cannot_run_exits_2(check, softmax, tmp_path, monkeypatch):
    code, lines = check(softmax, remap_path=tmp_path)
    assert code == 2 and lines[-1] == f"error: the remap file {tmp_path} is not a regular file"
    code, lines = check(softmax, remap_path=tmp_path / "missing.py")
    assert code == 2 and lines[-1].startswith("error: cannot read remap file")
    if getattr(sys, "_base_executable", sys.executable) == sys.executable:
        pytest.skip("not in a virtual environment: no interpreter without swizzleperf to start children with")
    monkeypatch.setattr(sys, "executable", sys._base_executable)  # children start, but cannot import swizzleperf
    code, lines = check(softmax, hook("return pid").encode())
    assert code == 2
    assert lines[-1] == "COULD NOT CHECK at bijectivity: the check itself failed, not the remap"
    assert "could not start its work" in lines[-2] and "No module named 'swizzleperf'" in lines[-2]


def test_the_real_command_prints_no_traceback(softmax, tmp_path):
    path = tmp_path / "remap.py"
    path.write_bytes(HOSTILE[0][1])
    done = subprocess.run([sys.executable, "-m", "swizzleperf", "check", str(softmax), "--remap", str(path),
                           "--hardware", "mi300x"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "400"})
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr
    assert "the loop runs 9223372036854775808 times; the cap is 64" in done.stdout


@pytest.mark.parametrize("source", [c[1] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_the_api_raises_only_rejections(source):
    """What the loop calls on every answer and every earlier attempt: a reason or a value, nothing else."""
    text = source.decode("utf-8", "replace")
    kernel_hook = load_kernel(ROOT / "kernels/softmax.py").hook
    try:
        remap.static_check(text, kernel_hook)
    except RemapRejected as exc:
        assert exc.stage == "static" and "\n" not in exc.reason and len(exc.reason) < 800
    try:
        assert isinstance(remap.normalise(text), str)
    except SyntaxError:
        pass
    extraction = extract_hook(f"```python\n{text}\n```", kernel_hook)
    assert extraction.ok or len(extraction.error) < 1000
