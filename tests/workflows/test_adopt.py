"""`swizzleperf adopt`: stock Triton modules become kernel files that pass check and optimize.

The two inputs under tests/fixtures/adopt/ are written for these tests in the style of the Triton
tutorials (autotune with a key, GROUP_SIZE_M grouping, a module-level driver call and an
import-time test; a fused row softmax with driver properties at import). They cannot even be
imported here: the CPU interpreter has no active driver.
"""

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from swizzleperf.cli.main import app, main
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.validation.bijectivity import logical_ids

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "adopt"
runner = CliRunner()


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _adopt(stock: Path, out: Path, expect: int = 0):
    before = _sha(stock)
    result = runner.invoke(app, ["adopt", str(stock), "-o", str(out)])
    assert result.exit_code == expect, result.output + repr(result.exception)
    assert _sha(stock) == before  # the original is never edited
    return result


def _check_and_optimize(kernel: Path, tmp_path: Path) -> None:
    """The adopted file passes check (bijective hook, correct on the CPU interpreter) and optimize -n 4."""
    checked = runner.invoke(app, ["check", str(kernel), "--seeds", "1"])
    assert checked.exit_code == 0, checked.output + repr(checked.exception)
    assert "OK" in checked.output and "correctness: matches the reference" in checked.output
    runs = tmp_path / "runs"
    optimized = runner.invoke(app, ["optimize", str(kernel), "-n", "4", "--size", "tiny", "--hardware", "mi300x",
                                    "--profiler", "sim", "--no-library", "--runs-dir", str(runs)])
    assert optimized.exit_code == 0, optimized.output + repr(optimized.exception)
    [run] = list(runs.iterdir())
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "finished" and record["profiler"] == "sim"
    assert len((run / "attempts.jsonl").read_text().splitlines()) >= 2
    assert (run / "report.md").is_file()


def _grouped_order(pid: int, num_pid_m: int, num_pid_n: int, group: int) -> tuple[int, int]:
    """The stock matmul's own tile order, restated here to compare the inserted hook with."""
    per_group = group * num_pid_n
    first = pid // per_group * group
    rows = min(num_pid_m - first, group)
    return first + (pid % per_group) % rows, (pid % per_group) // rows


def test_a_tutorial_style_matmul_is_adopted_and_passes_check_and_optimize(tmp_path):
    out = tmp_path / "matmul.py"
    result = _adopt(FIXTURES / "stock_matmul.py", out)
    assert "pinned MATMUL_KERNEL_CONFIG" in result.output and "first of its 3 autotune configs" in result.output
    assert "2D hook" in result.output and "TODO" not in result.output
    text = out.read_text()
    assert "\n@triton.autotune" not in text and "TODO" not in text
    module_level, main_block = text.split('if __name__ == "__main__":')
    assert "DEVICE = triton.runtime.driver" in main_block and "benchmark.run" in main_block
    assert "DEVICE =" not in module_level and "benchmark.run" not in module_level

    kernel = load_kernel(out)
    assert kernel.hook.grid_params == ("num_pid_m", "num_pid_n")
    assert kernel.sizes["tested"] == {"M": 384, "N": 320, "K": 256}  # from the module's own test
    group = kernel.module.MATMUL_KERNEL_CONFIG["GROUP_SIZE_M"]
    for grid in [(5, 3), (9, 2)]:  # the identity hook is the original grouped order, tile for tile
        expected = [m * grid[1] + n for m, n in (_grouped_order(p, *grid, group) for p in range(grid[0] * grid[1]))]
        assert logical_ids(kernel.hook_source, kernel.hook, grid, {"NUM_XCDS": 8}).tolist() == expected
    _check_and_optimize(out, tmp_path)


def test_a_fused_row_softmax_is_adopted_and_passes_check_and_optimize(tmp_path):
    out = tmp_path / "softmax.py"
    result = _adopt(FIXTURES / "stock_softmax.py", out)
    assert "1D hook" in result.output and "autotune" not in result.output
    text = out.read_text()
    module_level, main_block = text.split('if __name__ == "__main__":')
    assert "get_device_properties" in main_block and "get_device_properties" not in module_level
    assert "row = swizzle(tl.program_id(0), tl.num_programs(0), NUM_XCDS)" in module_level
    kernel = load_kernel(out)
    assert kernel.grid("tested") == (1823,) and kernel.tolerance == {"atol": 1e-8, "rtol": 1e-5}
    _check_and_optimize(out, tmp_path)


BATCHED = '''
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    batch = tl.program_id(1)
    base = (batch * tl.num_programs(0) + row) * n_cols
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + base + cols, mask=cols < n_cols)
    tl.store(y_ptr + base + cols, 3 * x, mask=cols < n_cols)


def scale(x):
    batch, rows, cols = x.shape
    y = torch.empty_like(x)
    scale_kernel[(rows, batch)](x, y, cols, BLOCK=triton.next_power_of_2(cols))
    return y


if __name__ == "__main__":
    x = torch.randn(3, 50, 20)
    torch.testing.assert_close(scale(x), 3 * x)
'''


def test_a_kernel_reading_two_axes_gets_a_hook_per_axis_in_the_gpus_order(tmp_path):
    stock, out = tmp_path / "batched.py", tmp_path / "adopted.py"
    stock.write_text(BATCHED)
    _adopt(stock, out)
    kernel = load_kernel(out)
    assert kernel.hook.grid_params == ("num_pid_axis_1", "num_pid_axis_0") and kernel.grid("tested") == (3, 50)
    # axis 0 runs fastest on a GPU: launch id p is (p // 50, p % 50), the identity in C order
    assert logical_ids(kernel.hook_source, kernel.hook, (3, 50), {"NUM_XCDS": 8}).tolist() == list(range(150))
    checked = runner.invoke(app, ["check", str(out), "--seeds", "1"])
    assert checked.exit_code == 0, checked.output


def _one_line_error(argv, monkeypatch, capsys) -> str:
    monkeypatch.setattr("sys.argv", ["swizzleperf", *argv])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    out = capsys.readouterr().out
    assert "Traceback" not in out and out.strip().count("\n") == 0, out
    return out


def test_modules_with_nothing_to_adopt_get_one_line_errors(tmp_path, monkeypatch, capsys):
    plain = tmp_path / "plain.py"
    plain.write_text("import torch\n\ndef add(x, y):\n    return x + y\n")
    assert "no @triton.jit kernel" in _one_line_error(["adopt", str(plain), "-o", str(tmp_path / "a.py")],
                                                        monkeypatch, capsys)
    no_pid = tmp_path / "no_pid.py"
    no_pid.write_text("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr):\n"
                      "    tl.store(x_ptr, 1.0)\n")
    assert "calls tl.program_id" in _one_line_error(["adopt", str(no_pid), "-o", str(tmp_path / "b.py")],
                                                     monkeypatch, capsys)
    assert "never edits the original" in _one_line_error(["adopt", str(no_pid), "-o", str(no_pid)],
                                                         monkeypatch, capsys)
    assert not (tmp_path / "a.py").exists() and not (tmp_path / "b.py").exists()


def test_a_declaration_it_cannot_infer_is_named_and_marked_todo(tmp_path):
    stock, out = tmp_path / "untested.py", tmp_path / "adopted.py"
    # the softmax without its import-time test: nothing says how large the problem is
    stock.write_text((FIXTURES / "stock_softmax.py").read_text().split("torch.manual_seed(0)")[0])
    result = _adopt(stock, out, expect=1)
    assert "TODO SIZES: no call of softmax() with tensors built by torch.randn/rand gives n_rows, n_cols" \
        in result.output
    said = " ".join(result.output.split())
    # "inferred" only with the module's line; the rest is called a guess
    assert "inferred grid, launch: from softmax()'s launch at untested.py:" in said
    assert (f"guessed DEFAULT_SIZE, CHECK_SIZES, TOLERANCE, make_inputs: nothing in the module says; edit them in "
            f"{out} if they are wrong") in said
    text = out.read_text()
    assert text.count("TODO(swizzleperf adopt)") == 1 and "# TODO(swizzleperf adopt): SIZES" in text
    assert "\nSIZES =" not in text and "def make_inputs" in text
    checked = runner.invoke(app, ["check", str(out)])
    assert checked.exit_code != 0 and "missing SIZES" in str(checked.exception)


GUARDED = '''\
import torch
import triton
import triton.language as tl

try:
    from triton.language.extra import libdevice
except ImportError:  # an older Triton
    libdevice = tl.math

DEVICE = triton.runtime.driver.active.get_active_torch_device()


@triton.jit
def exp_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, libdevice.exp(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


def exp(x):
    y = torch.empty_like(x)
    exp_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return y


x = torch.randn(4096, device=DEVICE)
y = exp(x)
assert torch.allclose(y, torch.exp(x), atol=1e-6, rtol=(0 if DEVICE.type == "cuda" else 1e-5))
'''


def test_guarded_imports_stay_and_a_computed_tolerance_is_said(tmp_path):
    stock, out = tmp_path / "guarded.py", tmp_path / "adopted.py"
    stock.write_text(GUARDED)
    result = _adopt(stock, out, expect=1)  # SIZES and grid: x.numel() says nothing of a size's name
    written = out.read_text()
    main = written.index('if __name__ == "__main__":')
    assert written.index("    from triton.language.extra import libdevice") < main  # the kernel needs it
    assert written.index("DEVICE = triton.runtime.driver.active") > main
    assert ('TOLERANCE = {"atol": 1e-06, "rtol": 1e-05}  # from the module\'s torch.allclose(...) at line 27; its '
            "rtol=0 if DEVICE.type == 'cuda' else 1e-05 is computed, so the defaults stand for it: check them") in written
    said = " ".join(result.output.split())
    assert "inferred TOLERANCE: from the module's torch.allclose(...) at line 27; its rtol=" in said
    assert "inferred reference: from the module's comparison at guarded.py:27" in said
    assert 'return {"y": torch.exp(x)}' in written
