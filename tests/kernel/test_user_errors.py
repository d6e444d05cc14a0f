"""swizzleperf/kernel/user_errors.py: lines of a run copy mapped to the user's file, hints, commands."""

from pathlib import Path

from swizzleperf.kernel.user_errors import FileMap, check_command, hint


def test_lines_of_a_copy_with_a_longer_hook_map_back_to_the_users_file():
    files = FileMap("kernels/x.py", hook_start=10, hook_end_run=16, shift=3)  # the hook grew from 4 to 7 lines
    assert files.describe(9) == "kernels/x.py:9"
    assert files.describe(10) == "line 1 of the remap hook"
    assert files.describe(16) == "line 7 of the remap hook"
    assert files.describe(17) == "kernels/x.py:14"
    assert FileMap("x.py").describe(40) == "x.py:40"


def test_hints_name_the_fix_of_known_quirks_only():
    assert hint(RuntimeError("Torch not compiled with CUDA enabled")).startswith(
        "; hint: the kernel file asks for a CUDA device where there is none")
    wrapped = RuntimeError("interpreter failed")
    wrapped.__cause__ = ValueError("mask has unsupported dtype")
    assert "`tl.where(flag, offs < n, False)`" in hint(wrapped)
    assert hint(KeyError("N")) == ""


def test_the_check_command_names_the_file_as_typed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert check_command(tmp_path / "kernels" / "x.py", "small", 3) == \
        "swizzleperf check kernels/x.py --size small --seed 3"
    assert check_command(Path("/elsewhere/my kernel.py"), "tiny") == "swizzleperf check '/elsewhere/my kernel.py' --size tiny"
