"""A launch record read back from disk is untrusted: every field that becomes code is checked."""

import copy
import json

import pytest

from swizzleperf.errors import CaptureError
from swizzleperf.kernel.launches import launch_record

GOOD = {
    "format": 1, "seq": 0, "launcher": "the CPU interpreter", "grid": [4, 1, 1],
    "kernel": {"name": "scale", "module": "pkg.k", "qualname": "scale", "file": "/p/pkg/k.py", "line": 3},
    "params": [
        {"name": "x", "constexpr": False, "kind": "tensor", "dtype": "float32", "shape": [64], "strides": [1],
         "offset": 0, "extent": 64, "device": "cpu", "written": False, "in_place": False, "zeros": False},
        {"name": "idx", "constexpr": False, "kind": "tensor", "dtype": "int32", "shape": [2, 2], "strides": [2, 1],
         "offset": 1, "extent": 5, "device": "cpu", "values": [3, 1, 2, 0], "range": [0, 3], "sorted": False},
        {"name": "BLOCK", "constexpr": True, "kind": "int", "value": 16},
    ],
    "options": {"num_warps": 4}, "chosen": [], "device": "cpu (Triton interpreter)",
    "closure": {"imports": [{"kind": "import", "name": "tl", "text": "import triton.language as tl"}],
                "constants": [{"kind": "constant", "name": "EPS", "text": "EPS = 1e-06"}],
                "functions": [{"name": "scale", "module": "pkg.k", "file": "/p/pkg/k.py", "line": 3,
                               "source": "def scale(x, idx, BLOCK: tl.constexpr):\n    pass\n"}],
                "unresolved": [], "problems": []},
    "cwd": "/p", "argv": ["-m", "pytest"],
}


def _read(tmp_path, data):
    path = tmp_path / "launch.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return launch_record.read(path)


def _bad(tmp_path, edit) -> str:
    data = copy.deepcopy(GOOD)
    edit(data)
    with pytest.raises(CaptureError) as err:
        _read(tmp_path, data)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_good_record_reads_back(tmp_path):
    record = _read(tmp_path, GOOD)
    assert record.programs == 4
    assert [p.name for p in record.tensors()] == ["x", "idx"]


def test_not_json_is_one_line(tmp_path):
    with pytest.raises(CaptureError, match=r"launch.json is not valid JSON \(Expecting property name"):
        _read(tmp_path, "{not json")


@pytest.mark.parametrize("edit,message", [
    (lambda d: d["params"][0].update(name="x; import os"),
     "params.0.tensor.name: Value error, 'x; import os' is not a Python identifier"),
    (lambda d: d["closure"]["imports"][0].update(text="import os; os.system('rm -rf /')"),
     "closure.imports.0: Value error, import unit 'tl' is not one import statement"),
    (lambda d: d["closure"]["constants"][0].update(text="EPS = __import__('os').getcwd()"),
     "closure.constants.0: Value error, constant 'EPS' is not one assignment of a literal"),
    (lambda d: d["closure"]["functions"][0].update(source="def scale():\n    pass\nimport os\n"),
     "closure.functions.0: Value error, function 'scale': its source is not one undecorated def scale(...)"),
    (lambda d: d.update(grid=[0, 1, 1]), "Value error, grid [0, 1, 1] is not a launch grid"),
    (lambda d: d["params"][1].update(values=[1, 2]),
     "params.1.tensor: Value error, idx: 2 values for a storage span of 4 elements"),
    (lambda d: d["params"][0].update(dtype="object"), "params.0.tensor.dtype: Input should be"),
    (lambda d: d["closure"]["functions"][0].update(name="other", source="def other():\n    pass\n"),
     "Value error, the closure ends with other, not the kernel scale"),
])
def test_a_doctored_record_is_refused_with_the_field(tmp_path, edit, message):
    assert message in _bad(tmp_path, edit)


def test_an_argument_a_kernel_file_cannot_rebuild_is_named(tmp_path):
    from swizzleperf.workflows.launch_capture.kernel_file import write_kernel_file
    data = copy.deepcopy(GOOD)
    data["params"].append({"name": "desc", "constexpr": False, "kind": "object", "value": "<TensorDescriptor>",
                           "type": "TensorDescriptor"})
    with pytest.raises(CaptureError, match=r"^scale's argument desc is a TensorDescriptor \(<TensorDescriptor>\), "
                                           r"which a kernel file cannot rebuild$"):
        write_kernel_file([_read(tmp_path, data)], tmp_path / "k.py", "python job.py")
    assert not (tmp_path / "k.py").exists()
