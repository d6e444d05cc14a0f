"""Issue 35's corpus of hostile data (tests/hostile_data.py) through the production readers.

Asserted for every case: a refusal is a SwizzlePerfError of one line naming what is wrong (never a
traceback, never "internal error"); nothing a case holds is executed (MARKER is never created);
nothing is written outside the run or library directory; no non-bijection becomes the best or is
rendered into best/ or a library.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest
from hostile_data import (
    ATTEMPT_LINES,
    CORPUS_SIZE,
    FORGED_SOURCES,
    HIDDEN_VARIABLES,
    LIBRARY_FIELDS,
    LIBRARY_SOURCES,
    LOOP_ORDERS,
    MARKER,
    RUN_FIELDS,
    RUN_JSON,
    SPECS,
    WRAPS,
)
from rich.console import Console

from swizzleperf.cli.optimize_command import run_optimize
from swizzleperf.errors import HardwareSpecError, LibraryError, RunError, SwizzlePerfError
from swizzleperf.hardware.presets import load_spec_file
from swizzleperf.kernel.contract import LoopOrderSignature, load_kernel
from swizzleperf.loop.reverify import REREAD, run_kernel, verified_best
from swizzleperf.loop.rundir import RunDir
from swizzleperf.remaps.library import Library
from swizzleperf.untrusted.isolation import allowed_variable
from swizzleperf.validation.bijectivity import bijectivity_grids, check_bijective
from swizzleperf.validation.loop_order import check_loop_order
from swizzleperf.validation.proof_status import unproven_reason
from swizzleperf.workflows.export import export_run
from swizzleperf.workflows.optimize import OptimizeRequest

ROOT = Path(__file__).resolve().parents[2]


def test_the_corpus_has_at_least_150_cases():
    assert CORPUS_SIZE >= 150


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A project with a finished two-iteration run of the softmax kernel and a library entry `rows`."""
    project = tmp_path_factory.mktemp("hostile-data") / "project"
    project.mkdir()
    (project / "softmax.py").write_text((ROOT / "kernels/softmax.py").read_text().replace(
        'CHECK_SIZES = ["tiny", "small"]', 'CHECK_SIZES = ["tiny"]'))
    request = OptimizeRequest(kernel_path=project / "softmax.py", hardware="mi300x", profiler="sim",
                              proposer="search", iterations=2, size="small", runs_dir=project / "runs")
    run = run_optimize(request, Console(file=io.StringIO())).path
    cwd = Path.cwd()
    os.chdir(project)
    try:
        export_run(str(run), "rows", project / "lib", project / "runs")
    finally:
        os.chdir(cwd)
    return project


@pytest.fixture()
def project(pristine, tmp_path, monkeypatch) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(pristine, copy)
    record = copy / "runs" / next((pristine / "runs").iterdir()).name / "run.json"
    data = json.loads(record.read_text())
    data["kernel"]["path"] = str(copy / "softmax.py")
    record.write_text(json.dumps(data))
    monkeypatch.chdir(copy)
    return copy


def run_dir(project: Path) -> Path:
    return next((project / "runs").iterdir())


def one_line(exc: BaseException, *words: str) -> None:
    text = str(exc)
    assert isinstance(exc, SwizzlePerfError) and "\n" not in text and "internal error" not in text, text
    for word in words:
        assert word in text, (word, text)


@pytest.fixture(autouse=True)
def nothing_runs(tmp_path):
    yield
    assert not list(Path.cwd().rglob(MARKER)) and not (tmp_path / MARKER).exists()


@pytest.mark.parametrize("case,content,words", RUN_JSON, ids=[c[0] for c in RUN_JSON])
def test_a_run_json_that_is_not_a_record_is_one_line(project, case, content, words):
    (run_dir(project) / "run.json").write_bytes(content)
    with pytest.raises(RunError) as info:
        RunDir.open(run_dir(project))
    one_line(info.value, words)


def _set(data: dict, dotted: str, value) -> None:
    *path, last = dotted.split(".")
    for part in path:
        data = data[part]
    data[last] = value


@pytest.mark.parametrize("case,field,value,words", RUN_FIELDS, ids=[c[0] for c in RUN_FIELDS])
def test_a_run_json_field_out_of_its_schema_is_one_line(project, case, field, value, words):
    path = run_dir(project) / "run.json"
    data = json.loads(path.read_text())
    _set(data, field, value)
    path.write_text(json.dumps(data))
    with pytest.raises(RunError) as info:
        RunDir.open(run_dir(project))
    one_line(info.value, words)


@pytest.mark.parametrize("case,line,words", ATTEMPT_LINES, ids=[c[0] for c in ATTEMPT_LINES])
def test_a_broken_attempt_line_is_one_line_naming_it(project, case, line, words):
    log = run_dir(project) / "attempts.jsonl"
    lines = log.read_bytes().splitlines()
    log.write_bytes(b"\n".join([lines[0], line, *lines[1:]]) + b"\n")
    with pytest.raises(RunError) as info:
        RunDir.open(run_dir(project)).load_history()
    one_line(info.value, words)
    if "UTF-8" not in words:
        assert "attempts.jsonl:2 " in str(info.value)


@pytest.mark.parametrize("case,source", FORGED_SOURCES, ids=[c[0] for c in FORGED_SOURCES])
def test_a_forged_best_attempt_is_rechecked_and_never_trusted(project, case, source):
    run = RunDir.open(run_dir(project))
    lines = run.attempts_path.read_text().splitlines()
    forged = json.loads(lines[-1])
    forged.update(iteration=len(lines), source=source, family="forged")
    forged["report"].update(hits=forged["report"]["accesses"], hit_pct=100.0)
    run.attempts_path.write_text("\n".join([*lines, json.dumps(forged)]) + "\n")
    history = run.load_history()
    assert history.best().family == "forged"
    best = verified_best(run, run_kernel(run), history)
    assert best.family != "forged"
    again = RunDir.open(run.path).load_history()
    rejected = next(a for a in again.attempts if a.iteration == forged["iteration"])
    assert rejected.report is None and rejected.failure.detail.startswith(REREAD)
    assert rejected.failure.stage in ("propose", "static", "bijectivity")


def _link_cases(run: Path, outside: Path) -> list[tuple[Path, str]]:
    fifo = outside / "fifo"
    os.mkfifo(fifo)
    (outside / "dir").mkdir()
    shutil.copy(run / "run.json", outside / "run.json")
    return [(run / "run.json", "/dev/zero"), (run / "run.json", "/dev/urandom"), (run / "run.json", str(fifo)),
            (run / "run.json", str(outside / "dir")), (run / "run.json", str(outside / "run.json")),
            (run / "attempts.jsonl", "/dev/zero"), (run / "attempts.jsonl", str(outside / "run.json")),
            (run / "batch.json", "/dev/zero")]


@pytest.mark.parametrize("index", range(8))
def test_a_file_linked_out_of_the_run_is_not_read(project, tmp_path, index):
    outside = tmp_path / "outside"
    outside.mkdir()
    link, target = _link_cases(run_dir(project), outside)[index]
    link.unlink(missing_ok=True)
    os.symlink(target, link)
    with pytest.raises(RunError) as info:
        run = RunDir.open(run_dir(project))
        run.load_history()
        run.pending_batch()
    one_line(info.value, "links outside")


def _retarget(project: Path, path: Path, sha256: str | None = None) -> RunDir:
    record = run_dir(project) / "run.json"
    data = json.loads(record.read_text())
    data["kernel"]["path"] = str(path)
    if sha256 is not None:
        data["kernel"]["sha256"] = sha256
    record.write_text(json.dumps(data))
    return RunDir.open(run_dir(project))


@pytest.mark.parametrize("where", ["elsewhere", "dotdot", "symlink-out", "other-inside", "named-other"])
def test_run_json_cannot_make_a_foreign_file_run(project, tmp_path, where):
    import hashlib
    evil = tmp_path / "elsewhere" / "evil.py"
    evil.parent.mkdir()
    evil.write_text(f"open({str(tmp_path / MARKER)!r}, 'w').close()\n")
    digest = hashlib.sha256(evil.read_bytes()).hexdigest()
    if where == "elsewhere":
        call = lambda: run_kernel(_retarget(project, evil, digest))  # noqa: E731
    elif where == "dotdot":
        call = lambda: run_kernel(_retarget(project, project / ".." / "elsewhere" / "evil.py", digest))  # noqa: E731
    elif where == "symlink-out":
        os.symlink(evil, project / "looks_local.py")
        call = lambda: run_kernel(_retarget(project, project / "looks_local.py", digest))  # noqa: E731
    elif where == "other-inside":
        shutil.copy(evil, project / "evil.py")
        call = lambda: run_kernel(_retarget(project, project / "evil.py"))  # noqa: E731  (the run's hash kept)
    else:
        call = lambda: run_kernel(RunDir.open(run_dir(project)), evil)  # noqa: E731
    with pytest.raises(RunError) as info:
        call()
    one_line(info.value)
    assert not (tmp_path / MARKER).exists()


def _entry_path(project: Path) -> Path:
    return project / "lib" / "rows.json"


@pytest.mark.parametrize("case,field,value,words", LIBRARY_FIELDS, ids=[c[0] for c in LIBRARY_FIELDS])
def test_a_library_entry_out_of_its_schema_is_one_line(project, case, field, value, words):
    data = json.loads(_entry_path(project).read_text())
    data[field] = value
    _entry_path(project).write_text(json.dumps(data))
    with pytest.raises(LibraryError) as info:
        Library(project / "lib").entries()
    one_line(info.value, "rows.json", words)
    before = (project / "lib" / "__init__.py").read_text()
    assert "import os" not in before


@pytest.mark.parametrize("case,source,words", LIBRARY_SOURCES, ids=[c[0] for c in LIBRARY_SOURCES])
def test_a_library_entry_whose_source_is_not_one_remap_is_refused(project, case, source, words):
    data = json.loads(_entry_path(project).read_text())
    data["source"] = source
    _entry_path(project).write_text(json.dumps(data))
    with pytest.raises(LibraryError) as info:
        Library(project / "lib").get("rows")
    one_line(info.value, "rows.json", words)


@pytest.mark.parametrize("name", ["../rows", "lib/rows", "/etc/passwd", "rows.json", ""])
def test_a_library_name_never_reaches_a_path(project, name):
    with pytest.raises(LibraryError) as info:
        Library(project / "lib").get(name)
    one_line(info.value, "cannot be a library name")


@pytest.mark.parametrize("case,name,content,words", SPECS, ids=[c[0] for c in SPECS])
def test_a_hardware_spec_is_bounded_and_in_range(tmp_path, case, name, content, words):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(HardwareSpecError) as info:
        load_spec_file(path)
    one_line(info.value, words)


SIG = LoopOrderSignature("kv_order", "step", "n_steps", "local_tile", ("NUM_XCDS",))


@pytest.mark.parametrize("body", LOOP_ORDERS)
def test_a_loop_order_wrong_only_past_the_sampled_tiles_is_refuted(body):
    source = f"@triton.jit\ndef kv_order(step, n_steps, local_tile, NUM_XCDS: tl.constexpr):\n    return {body}\n"
    report = check_loop_order(source, SIG, [16, 2048], 1, {"NUM_XCDS": 1}, isolate=False)
    assert all(c.ok for c in report.checks) and not report.ok
    assert report.message.startswith("with local_tile = ") and "z3, over every local tile" in report.message


@pytest.mark.parametrize("factor", WRAPS)
def test_a_remap_that_wraps_int32_is_accepted_only_where_its_proof_covers_the_declared_grids(factor):
    kernel = load_kernel(ROOT / "kernels" / "softmax.py")
    declared = [kernel.grid(n) for n in kernel.sizes]
    needed = max(g[0] for g in declared)
    source = ("@triton.jit\ndef swizzle(pid, num_pids, NUM_XCDS: tl.constexpr):\n"
              f"    if pid * {factor} < 0:\n        return 0\n    return pid\n")
    report = check_bijective(source, kernel.hook, bijectivity_grids(kernel.hook, declared, 8), {"NUM_XCDS": 8},
                             isolate=False)
    wraps_at = 2 ** 31 // factor
    if not report.ok:  # a sampled grid reached the wrap: a collision, found before any proof
        assert wraps_at < 1_000_003
        return
    reason = unproven_reason(report.proof, needed)
    assert (reason is None) == (wraps_at >= needed), (wraps_at, needed, reason)


@pytest.mark.parametrize("name", HIDDEN_VARIABLES)
def test_a_child_never_sees_a_variable_off_the_list(name):
    assert not allowed_variable(name)
