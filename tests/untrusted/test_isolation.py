"""Children that handle candidates are confined: no provider keys, no planted modules, hard limits.

`swizzleperf.untrusted.isolation:probe` runs as a sandbox target and reports what the child sees; the
limits are shown by what stops it. Every failure comes back as one line, never a traceback. Each test
runs twice: in a fork of the warm server (the default) and in a child started afresh.
"""

import socket
import subprocess
from pathlib import Path

import pytest

import swizzleperf
from swizzleperf.errors import ChildSetupError, SandboxError
from swizzleperf.kernel.contract import HookSignature
from swizzleperf.untrusted.isolation import Confinement
from swizzleperf.untrusted.sandbox import run_in_child
from swizzleperf.validation.bijectivity import check_bijective

HOOK = HookSignature(name="swizzle", pid="pid", grid_params=("num_pids",), constexprs=("NUM_XCDS",))
IDENTITY = "@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n    return pid\n"


@pytest.fixture(autouse=True, params=["fork server", "fresh child"])
def how_children_start(request, monkeypatch):
    monkeypatch.setenv("SWIZZLEPERF_FORK_SERVER", "1" if request.param == "fork server" else "0")
    return request.param


def probe(confinement: Confinement | None = None, timeout: float = 60, **payload) -> dict:
    return run_in_child("swizzleperf.untrusted.isolation:probe", payload, timeout, what="the probe",
                        confinement=confinement).value


def test_the_child_environment_is_an_allowlist_without_provider_keys(monkeypatch):
    secrets = {"OPENAI_API_KEY": "sk-fake", "ANTHROPIC_API_KEY": "fake", "SWIZZLEPERF_SERVICE_TOKEN": "t",
               "HF_TOKEN": "t", "MY_SECRET": "s", "AWS_SESSION_TOKEN": "t", "CUDA_AUTH_KEY": "k",
               "SWIZZLEPERF_BEARER": "b", "TRITON_CACHE_PASS": "p", "CUDA_HOOK_URL": "u", "TRITON_REDIS_HOST": "h"}
    kept = {"SWIZZLEPERF_CACHE": "/tmp/cache", "TRITON_CACHE_DIR": "/tmp/triton", "CUDA_VISIBLE_DEVICES": "0",
            "HIP_VISIBLE_DEVICES": "0", "LANG": "C.UTF-8"}
    for name, value in {**secrets, **kept, "UNRELATED_SETTING": "x", "PYTHONPATH": "/elsewhere"}.items():
        monkeypatch.setenv(name, value)
    seen = set(probe()["env"])
    assert not seen & set(secrets), seen & set(secrets)
    assert set(kept) | {"PATH", "HOME"} <= seen
    assert "UNRELATED_SETTING" not in seen and "PYTHONPATH" not in seen


def test_a_planted_module_in_the_working_directory_is_never_imported(tmp_path, monkeypatch):
    planted, marker = tmp_path / "planted", tmp_path / "planted-json-was-imported"
    planted.mkdir()
    (planted / "json.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise ImportError('planted')\n")
    monkeypatch.chdir(planted)
    monkeypatch.setenv("PYTHONPATH", str(planted))  # dropped from the environment, and -I ignores it anyway
    seen = probe()
    assert seen["isolated"] == 1
    assert str(planted) not in seen["sys_path"] and "" not in seen["sys_path"]
    assert Path(seen["cwd"]).name.startswith("swizzleperf-sandbox-") and not Path(seen["cwd"]).exists()
    assert Path(seen["json_module"]).parent != planted
    assert seen["swizzleperf"] == swizzleperf.__file__  # the installed (editable) package still resolves
    report = check_bijective(IDENTITY, HOOK, [(16,), (1000,)], {"NUM_XCDS": 8})  # its child reads JSON
    assert report.ok, report.message
    assert not marker.exists()


def test_the_memory_limit_stops_a_child_with_a_clear_reason():
    capped = Confinement(memory_mb=400, threads=1)  # each OpenBLAS thread reserves buffers: a cap needs few
    with pytest.raises(SandboxError) as info:
        probe(capped, allocate_mb=2000)
    assert str(info.value) == "the probe ran out of memory (its limit of 400 MB of address space) and was stopped"
    assert probe(capped, allocate_mb=50)["isolated"] == 1  # below the limit it runs


def test_the_cpu_limit_stops_a_spinning_child():
    with pytest.raises(SandboxError) as info:
        probe(Confinement(cpu_s=1), spin_s=30)
    assert str(info.value) == "the probe reached its limit of 1 s of CPU time and was stopped"


def test_the_file_size_limit_stops_a_large_write():
    with pytest.raises(SandboxError) as info:
        probe(Confinement(file_mb=1), write_mb=4)
    assert str(info.value) == "the probe raised OSError: [Errno 27] File too large"


def test_an_exception_in_the_child_is_one_line_and_setup_failures_are_told_apart():
    with pytest.raises(SandboxError) as info:
        probe(allocate_mb="lots")
    assert str(info.value) == "the probe raised ValueError: invalid literal for int() with base 10: 'lots'"
    assert not isinstance(info.value, ChildSetupError)
    with pytest.raises(ChildSetupError) as setup:
        run_in_child("swizzleperf.untrusted.isolation:no_such_function", {}, 60, what="the probe")
    assert "could not start its work" in str(setup.value) and "AttributeError" in str(setup.value)
    assert "\n" not in str(setup.value) and "Traceback" not in str(setup.value)


def _network_namespaces_allowed() -> bool:
    for command in (["unshare", "-n", "true"], ["unshare", "-rn", "true"]):
        try:
            if subprocess.run(command, capture_output=True, timeout=10).returncode == 0:
                return True
        except (OSError, subprocess.TimeoutExpired):
            pass
    return False


def test_a_child_without_network_cannot_reach_a_local_server():
    if not _network_namespaces_allowed():
        pytest.skip("this machine allows no network namespace (unshare -n / -rn refused)")
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert probe(connect=port)["connected"] is True  # the default keeps the network (GPU children)
        assert probe(Confinement(network=False), connect=port)["connected"] is False
