"""The corpus's other kernels (tests/capture_corpus.py): a file of their own, for the test workers to share."""

import pytest
from capture_corpus import CORPUS, ids, run_case

CASES = CORPUS[7:]


@pytest.mark.parametrize("project,kernel,ndim,how", CASES, ids=ids(CASES))
def test_captured_kernel_passes_check_and_optimize_and_goes_back(project, kernel, ndim, how, tmp_path, monkeypatch):
    run_case(project, kernel, ndim, how, tmp_path, monkeypatch)
