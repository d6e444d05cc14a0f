"""Issue 13's corpus (tests/hostile_corpus.py: CORPUS, 300+ candidates of every class) through the
checks a candidate meets before profiling: extraction (a model's answer), the remap file's cut,
the static check, counted work, the sampled bijectivity check and the z3 proof.

Every candidate goes through the production functions in this process (check_bijective with
isolate=False: the same evaluation and proof, without the children, which only add confinement;
the static check and the counted work run before anything is evaluated, so nothing can execute
or run long). A deterministic sample goes through `swizzleperf check --remap` with its children.
Asserted: no exception other than a rejection, no accepted non-bijection, no rejected valid
remap, every rejection one line naming the stage, and no candidate's code ever ran.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hostile_corpus import CORPUS, MARKER, Case

from swizzleperf.cli.main import _remap_from_file, main
from swizzleperf.errors import RemapRejected
from swizzleperf.kernel.contract import load_kernel
from swizzleperf.proposers.llm.extract import extract_hook
from swizzleperf.remaps.check import static_check
from swizzleperf.validation.bijectivity import bijectivity_grids, check_bijective
from swizzleperf.validation.proof_status import z3_installed

ROOT = Path(__file__).resolve().parents[2]
KERNELS = {1: "softmax", 2: "gemm", 3: "attention"}
STAGES = ("propose", "static", "bijectivity")


@pytest.fixture(scope="module")
def kernels():
    return {ndim: load_kernel(ROOT / "kernels" / f"{name}.py") for ndim, name in KERNELS.items()}


def judge(case: Case, kernel, tmp_path: Path) -> tuple[str | None, str]:
    """(the stage that rejects the candidate, or None, and the reason or the bijectivity sentence)."""
    if case.kind == "llm":
        extraction = extract_hook(case.text, kernel.hook)
        if not extraction.ok:
            return "propose", extraction.error
        source = extraction.source
    else:
        path = tmp_path / "remap.py"
        path.write_text(case.text)
        try:
            source = _remap_from_file(path, kernel)
        except RemapRejected as exc:
            return exc.stage, exc.reason
    try:
        static_check(source, kernel.hook)
        grids = bijectivity_grids(kernel.hook, [kernel.grid(s) for s in kernel.sizes], 8)
        report = check_bijective(source, kernel.hook, grids, {"NUM_XCDS": 8}, isolate=False)
    except RemapRejected as exc:
        return exc.stage, exc.reason
    return (None, report.message) if report.ok else ("bijectivity", report.failure.message)


@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
def test_every_candidate_gets_its_verdict_on_one_line(case, kernels, tmp_path):
    stage, reason = judge(case, kernels[case.ndim], tmp_path)
    assert stage == case.stage, f"{case.id}: expected {case.stage}, got {stage}: {reason}"
    assert reason and "\n" not in reason and len(reason) < 2500 and case.fragment in reason, reason
    assert stage is None or stage in STAGES


def test_the_corpus_covers_every_class_of_the_issue():
    kinds = {c.kind: sum(1 for d in CORPUS if d.kind == c.kind) for c in CORPUS}
    assert len(CORPUS) >= 300
    assert set(kinds) == {"syntax", "exec", "resource", "non_bijection", "backdoor", "valid", "llm"}
    assert min(kinds.values()) >= 25
    backdoors = {c.id for c in CORPUS if c.kind == "backdoor"}
    assert {"backdoor-grid_1000001", "backdoor-m_33", "backdoor-program_1048576", "backdoor-unless_8_dies",
            "backdoor-softmax_8192x4"} <= backdoors


@pytest.mark.skipif(not z3_installed(), reason="the proof needs z3 (swizzleperf[proofs])")
@pytest.mark.parametrize("name", ["backdoor-grid_1000001", "backdoor-program_1048576", "backdoor-grid_123456789"])
def test_single_grid_backdoors_pass_the_sampled_grids_and_fail_the_proof(name, kernels, tmp_path):
    case = next(c for c in CORPUS if c.id == name)
    kernel = kernels[1]
    (tmp_path / "remap.py").write_text(case.text)
    source = _remap_from_file(tmp_path / "remap.py", kernel)
    grids = bijectivity_grids(kernel.hook, [kernel.grid(s) for s in kernel.sizes], 8)
    assert check_bijective(source, kernel.hook, grids, {"NUM_XCDS": 8}, prove=False, isolate=False).ok
    failure = check_bijective(source, kernel.hook, grids, {"NUM_XCDS": 8}, isolate=False).failure
    assert failure.kind == "counterexample" and failure.message.startswith("not a bijection: grid (")


SAMPLE = ["syntax-true_division", "exec-dunder_import", "resource-counted_work_64", "sampled-1d-half",
          "backdoor-grid_1000001", "valid-1d-reverse", "valid-family-1d-xcd_chunked(chunk=8)"]


@pytest.mark.parametrize("name", SAMPLE)
def test_a_sample_through_the_real_check_command_and_its_children(name, monkeypatch, capsys, tmp_path):
    """softmax checked at its tiny size only, as tests/validation/test_hostile.py does."""
    case = next(c for c in CORPUS if c.id == name)
    text = (ROOT / "kernels/softmax.py").read_text().replace('CHECK_SIZES = ["tiny", "small"]', 'CHECK_SIZES = ["tiny"]')
    (tmp_path / "softmax.py").write_text(text)
    (tmp_path / "remap.py").write_text(case.text)
    monkeypatch.setenv("COLUMNS", "3000")
    monkeypatch.setattr("sys.argv", ["swizzleperf", "check", str(tmp_path / "softmax.py"), "--remap",
                                     str(tmp_path / "remap.py"), "--hardware", "mi300x", "--seeds", "1"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert "Traceback" not in out.out + out.err
    if case.stage is None:
        assert exit_info.value.code == 0 and lines[-1] == "OK: the remap is safe to use with this kernel", lines
        bijectivity = next(line for line in lines if line.startswith("✓ bijectivity: "))
        assert "; proven bijective for all grid sizes (z3: every grid of up to 2,147,483,647 programs" in bijectivity
        return
    assert exit_info.value.code == 1 and lines[-1] == f"REJECTED at {case.stage}", lines
    failed = [line for line in lines if line.startswith("✗")]
    assert len(failed) == 1 and failed[0].startswith(f"✗ {case.stage}: ") and case.fragment in failed[0]


def test_no_candidate_ever_ran():
    assert not os.path.exists(MARKER)
