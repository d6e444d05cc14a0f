"""Issue 14: every bad input a newcomer meets is one line that says what to do, with its exit code.

Each test runs the real entry point (`swizzleperf.cli.main.main`, as the installed command does) and
asserts the exact line and that no traceback is printed.
"""

from pathlib import Path

import pytest

from swizzleperf.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "kernels" / "softmax.py"


@pytest.fixture()
def cli(monkeypatch, capsys):
    """`swizzleperf ARGS...` through main(): (exit code, output lines), after checking no traceback."""
    monkeypatch.setenv("COLUMNS", "2000")  # one message, one line, whatever its length

    def run(*args: str) -> tuple[int, list[str]]:
        monkeypatch.setattr("sys.argv", ["swizzleperf", *args])
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code
        captured = capsys.readouterr()
        assert "Traceback" not in captured.out + captured.err
        return code, [line for line in captured.out.splitlines() if line.strip()]
    return run


def test_a_static_rejection_names_its_stage_once(cli, tmp_path):
    remap = tmp_path / "abs.py"
    remap.write_text("@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return abs(pid)\n")
    code, lines = cli("check", str(SOFTMAX), "--remap", str(remap), "--hardware", "mi300x")
    assert code == 1
    failed = [line for line in lines if line.startswith("✗")]
    assert len(failed) == 1 and failed[0].startswith("✗ static: line 3: ") and "static: static" not in failed[0]
    assert "use tl.abs()" in failed[0]
    assert lines[-1] == "REJECTED at static"


def test_sweep_help_cites_nothing_outside_the_repository(cli):
    code, lines = cli("sweep", "--help")
    text = " ".join(lines)
    assert code == 0 and ".md" not in text
    assert "four attention mappings (block-first or head-first, naive or swizzled)" in text


def test_an_exception_with_no_message_is_reported_by_its_type():
    from swizzleperf.workflows.bench.suite import _first_line
    assert _first_line(RuntimeError("")) == "RuntimeError"
    assert _first_line(RuntimeError("\n\nsecond line\nthird")) == "second line"


@pytest.mark.parametrize("field, line", [
    ("num_xcds: 4", "num_xcds: not a field of a hardware spec (did you mean num_domains?)"),
    ("cus_per_xcd: 32", "cus_per_xcd: not a field of a hardware spec (did you mean cus_per_domain?)"),
    ("l2_way: 8", "l2_way: not a field of a hardware spec (did you mean l2_ways?)"),
    ("dispatch: {policy: round_robin, chunks: 2}", "dispatch.chunks: not a field of a dispatch (did you mean chunk?)"),
])
def test_a_spec_file_field_that_does_not_exist_names_the_one_meant(cli, tmp_path, field, line):
    spec = tmp_path / "mine.yaml"
    spec.write_text(f"base: mi300x\n{field}\n")
    code, lines = cli("hw", "--show", str(spec))
    assert code == 2
    assert lines == [f"error: invalid hardware spec {spec}: {line}"]


def test_a_spec_file_field_like_none_lists_the_fields(cli, tmp_path):
    spec = tmp_path / "mine.yaml"
    spec.write_text("base: mi300x\nbananas: 3\n")
    code, lines = cli("hw", "--show", str(spec))
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith(f"error: invalid hardware spec {spec}: bananas: not a field of a hardware spec "
                               f"(the fields are name, vendor, num_domains, cus_per_domain, ")


@pytest.mark.parametrize("command", ["optimize", "check", "profile"])
def test_a_bare_kernel_name_is_looked_up_under_kernels(cli, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "colsum.py").write_text("import triton\n")
    code, lines = cli(command, "colsum")
    assert code == 2  # found: the file is then refused for what it lacks
    assert lines[0] == ("error: colsum.py breaks the kernel contract: missing REMAP_HOOK, SIZES, DEFAULT_SIZE, "
                        "CHECK_SIZES, grid, make_inputs, make_outputs, launch")
    code, lines = cli(command, "rowsum")
    assert code == 2
    assert lines == ["error: no kernel 'rowsum': not a file and not kernels/rowsum.py (kernels/ has colsum)"]


def test_bench_other_sizes_that_no_kernel_declares_is_an_error_listing_the_sizes(cli, tmp_path):
    code, lines = cli("bench", str(SOFTMAX), "--other-sizes", "small,huge", "--runs-dir", str(tmp_path))
    assert code == 2
    assert lines == ["error: --other-sizes: no kernel declares 'huge' (softmax declares tiny, small, medium, large)"]
    assert list(tmp_path.iterdir()) == []  # refused before any run started


def test_model_without_proposer_implies_the_llm_proposer_and_says_so(cli, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code, lines = cli("optimize", str(SOFTMAX), "--hardware", "mi300x", "--model", "openai/gpt-4o",
                      "--runs-dir", str(tmp_path))
    assert code == 2  # the LLM proposer was made: it fails now for the key it lacks, before any run
    assert lines[0] == "--model openai/gpt-4o without --proposer: using --proposer llm"
    assert lines[-1].startswith("error: ") and "OPENAI_API_KEY" in lines[-1]
    assert not tmp_path.exists() or list(tmp_path.iterdir()) == []


def test_proposer_resolution():
    from swizzleperf.proposers.registry import resolve_proposer
    assert resolve_proposer(None, None) == ("search", None)
    assert resolve_proposer(None, "openai/gpt-4o") == ("llm", "--model openai/gpt-4o without --proposer: using "
                                                              "--proposer llm")
    assert resolve_proposer("hybrid", "openai/gpt-4o") == ("hybrid", None)
    assert resolve_proposer("search", "openai/gpt-4o") == ("search", "--proposer search asks no model: --model "
                                                                     "openai/gpt-4o is not used")


@pytest.mark.parametrize("runtime, line", [
    (None, "hardware mi300x (preset mi300x); profiler sim (auto: no GPU here (torch sees none), so the simulator "
           "predicts)"),
    ("cuda", "hardware mi300x (preset mi300x); profiler sim (auto: a CUDA GPU here, but the target mi300x is amd, so "
             "the simulator predicts)"),
])
def test_the_default_profiler_is_auto_and_says_which_and_why(cli, monkeypatch, runtime, line):
    from swizzleperf.profilers import select
    monkeypatch.setattr(select, "local_gpu_runtime", lambda: runtime)
    code, lines = cli("profile", str(SOFTMAX), "--size", "tiny", "--hardware", "mi300x")
    assert code == 0
    assert lines[0] == line
    assert not any("requested" in text for text in lines)


# --- failures in the user's own kernel code (issue 14) -----------------------------------------------

NO_REFERENCE = ROOT / "tests" / "data" / "no_reference.py"


def broken(tmp_path: Path, old: str, new: str, name: str = "mine.py") -> Path:
    """tests/data/no_reference.py with one edit, as tmp_path/NAME (the working directory)."""
    text = NO_REFERENCE.read_text()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.fixture()
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_size_missing_a_key_grid_reads_is_one_line(cli, in_tmp):
    path = broken(in_tmp, 'return (size["blocks"],)', 'return (size["blocks"] * size["N"],)')
    code, lines = cli("check", "mine.py")
    assert code == 2
    number = line_of(path, 'size["N"]')
    assert lines == [f"error: grid(SIZES['tiny']) raised KeyError: 'N' at mine.py:{number} "
                     f"(`return (size[\"blocks\"] * size[\"N\"],)`); SIZES['tiny'] has no 'N' (it has blocks): add it "
                     f"to that entry; reproduce with: swizzleperf check mine.py --size tiny"]


def test_a_module_level_driver_call_says_why_and_what_to_change(cli, in_tmp):
    path = broken(in_tmp, "MIX_LAUNCH_ID = False",
                  "MIX_LAUNCH_ID = False\nDEVICE = triton.runtime.driver.active.get_active_torch_device()")
    code, lines = cli("optimize", "mine.py", "--runs-dir", "runs")
    assert code == 2
    assert lines == [
        f"error: importing mine.py raised RuntimeError: 0 active drivers ([]). There should only be one. at "
        f"mine.py:{line_of(path, 'DEVICE =')} (`DEVICE = triton.runtime.driver.active.get_active_torch_device()`); "
        f"hint: the CPU interpreter has no GPU driver, so module-level `triton.runtime.driver.active...` calls (e.g. "
        f"`DEVICE = triton.runtime.driver.active.get_active_torch_device()`) fail on import: move them, and any test "
        f"code, under `if __name__ == \"__main__\":` and use the `device` argument of make_inputs/make_outputs; "
        f"reproduce with: TRITON_INTERPRET=1 python mine.py"]
    assert not (in_tmp / "runs").exists()


def correctness_line(lines: list[str]) -> str:
    (failed,) = [line for line in lines if line.startswith("✗")]
    assert failed.startswith("✗ correctness: size tiny seed 0: ")
    return failed.removeprefix("✗ correctness: size tiny seed 0: ").rsplit(" (", 1)[0]  # without the seconds


@pytest.mark.parametrize("function, old, new, raised", [
    ("make_inputs", 'torch.randn(size["blocks"] * BLOCK,', 'torch.randn(size["blocks"] * size["width"],',
     "KeyError: 'width'"),
    ("make_outputs", 'return {"y": torch.empty(', 'return {"y": 1 / 0 + torch.empty(', "ZeroDivisionError: division by zero"),
])
def test_a_failing_setup_function_is_one_line_with_a_command_to_reproduce(cli, in_tmp, function, old, new, raised):
    path = broken(in_tmp, old, new)
    code, lines = cli("check", "mine.py", "--seeds", "1", "--hardware", "mi300x")
    assert code == 2 and lines[-1] == "BROKEN KERNEL at correctness: the kernel fails with its own remap; fix the kernel file"
    number = line_of(path, new)
    text = path.read_text().splitlines()[number - 1].strip()
    extra = "; SIZES['tiny'] has no 'width' (it has blocks): add it to that entry" if "width" in raised else ""
    assert correctness_line(lines) == (f"{function} raised {raised} at mine.py:{number} (`{text}`){extra}; "
                                       f"reproduce with: swizzleperf check mine.py --size tiny --seed 0")


def test_an_interpreter_quirk_in_launch_gets_the_fix(cli, in_tmp):
    path = broken(in_tmp, "    where = launch if MIX else pid\n",
                  "    where = launch if MIX else pid\n    ok = (offs < BLOCK) & (pid >= 0)\n")
    path.write_text(path.read_text().replace("tl.store(y_ptr + where * BLOCK + offs, 3 * x + 1)",
                                             "tl.store(y_ptr + where * BLOCK + offs, 3 * x + 1, mask=ok)"))
    code, lines = cli("check", "mine.py", "--seed", "0", "--size", "tiny", "--hardware", "mi300x")
    assert code == 2
    number = line_of(path, "mask=ok")
    assert correctness_line(lines) == (
        f"launch raised ValueError: mask has unsupported dtype at mine.py:{number} "
        f"(`tl.store(y_ptr + where * BLOCK + offs, 3 * x + 1, mask=ok)`); hint: the CPU interpreter rejects a mask "
        f"built as `block_mask & scalar_condition` (a GPU compiles it): broadcast the scalar, e.g. "
        f"`(offs < n) & ((flag + tl.zeros_like(offs)) > 0)`, or use `tl.where(flag, offs < n, False)`; reproduce "
        f"with: swizzleperf check mine.py --size tiny --seed 0")


def test_a_failing_reference_is_one_line_and_optimize_says_fix_the_kernel(cli, in_tmp):
    path = broken(in_tmp, "BLOCK = 16\n", "BLOCK = 16\nTOLERANCE = {'atol': 0.0, 'rtol': 0.0}\n\n\n"
                                          "def reference(inputs, size):\n    return {'y': inputs['z']}\n")
    code, lines = cli("optimize", "mine.py", "--hardware", "mi300x", "--runs-dir", "runs", "-n", "1")
    assert code == 2
    number = line_of(path, "inputs['z']")
    assert lines[-1] == (f"error: the kernel's own remap failed correctness: size tiny seed 0: reference raised "
                         f"KeyError: 'z' at mine.py:{number} (`return {{'y': inputs['z']}}`); reproduce with: "
                         f"swizzleperf check mine.py --size tiny --seed 0 -- fix the kernel before optimizing it")


def test_a_failure_while_capturing_the_trace_is_one_line(cli, in_tmp):
    old, new = 'torch.randn(size["blocks"] * BLOCK,', 'torch.randn(size["blocks"] * size["width"],'
    path = broken(in_tmp, old, new)
    number = line_of(path, new)
    code, lines = cli("profile", "mine.py", "--hardware", "mi300x", "--profiler", "sim")
    assert code == 2
    assert lines[-1] == (f"error: make_inputs raised KeyError: 'width' while capturing the trace at mine.py:{number} "
                         f"(`{path.read_text().splitlines()[number - 1].strip()}`); reproduce with: swizzleperf check "
                         f"mine.py --size tiny")
