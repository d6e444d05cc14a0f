"""`swizzleperf capture` on the corpus of kernel packages: from each project's own test command to a
kernel file that passes `check` and `optimize -n 4`, with no line written by hand, and the best remap
written back into the project's module (`apply --to --write`), whose own test then passes.

The eleven projects under tests/fixtures/packages/ each launch their kernels in one of the ways real
libraries do (tests/fixtures/packages/README.md lists them). Each kernel is captured from
`python -m pytest -q tests/` run in its project, on the CPU interpreter with the capture's stand-ins
for the GPU; the written file must pass `check` as written and `optimize` must run four attempts.
"""

import pytest
from capture_corpus import CORPUS, ids, run_case

CASES = CORPUS[:7]


@pytest.mark.parametrize("project,kernel,ndim,how", CASES, ids=ids(CASES))
def test_captured_kernel_passes_check_and_optimize_and_goes_back(project, kernel, ndim, how, tmp_path, monkeypatch):
    run_case(project, kernel, ndim, how, tmp_path, monkeypatch)
