"""Files read back from disk (untrusted.readback) and hardware specs: bounded, regular, UTF-8, shallow,
in physical ranges; each refusal one line naming the file."""

import os

import pytest

from swizzleperf.errors import HardwareSpecError
from swizzleperf.hardware.presets import load_spec_file
from swizzleperf.untrusted import readback
from swizzleperf.untrusted.readback import StoredFileError


def test_a_record_is_read_only_when_it_is_a_small_regular_utf8_file_in_its_directory(tmp_path):
    good = tmp_path / "r.json"
    good.write_text('{"a": [1, {"b": "[[[["}]}')
    assert readback.read_json(good, "the record") == {"a": [1, {"b": "[[[["}]}
    with pytest.raises(StoredFileError, match=r"r.json is 25 bytes; the limit is 10$"):
        readback.read_json(good, "the record", max_bytes=10)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(StoredFileError, match="fifo.json is not a regular file"):
        readback.read_json(fifo, "the record")  # and does not block on the open
    outside = tmp_path / "sub"
    outside.mkdir()
    os.symlink(good, outside / "link.json")
    with pytest.raises(StoredFileError, match=r"link.json links outside .*sub \(to .*r.json\); refusing to read it"):
        readback.read_json(outside / "link.json", "the record")
    assert readback.read_json(outside / "link.json", "the record", inside=tmp_path)["a"][0] == 1


@pytest.mark.parametrize("text,message", [
    ("[" * 65 + "]" * 65, "nests 65 levels deep; the limit is 64"),
    ('{"a": "' + "[" * 500 + '"}', None),  # brackets inside a string do not nest
    ("{not json", r"is not valid JSON \(Expecting property name"),
])
def test_json_nesting_is_bounded_before_parsing(text, message):
    if message is None:
        assert readback.parse_json(text, "x") == {"a": "[" * 500}
    else:
        with pytest.raises(StoredFileError, match=message):
            readback.parse_json(text, "x")


@pytest.mark.parametrize("name,content,message", [
    ("deep.yaml", "a: " + "[" * 20_000 + "]" * 20_000, "nests 20,000 levels deep; the limit is 64"),
    ("deep.json", '{"a": ' + "[" * 20_000 + "]" * 20_000 + "}", "nests 20,001 levels deep; the limit is 64"),
    ("latin1.yaml", b"name: caf\xe9\n", r"is not UTF-8 text \(byte 0xe9 at offset 9\)"),
    ("alias.yaml", "a: &x [1, 2]\nb: *x\n", r"uses a YAML alias \(\*x\); write the values out"),
    ("dies.yaml", "base: mi300x\nnum_domains: 1099511627776\n", "num_domains: Input should be less than or equal to 64"),
    ("cus.yaml", "base: mi300x\ncus_per_domain: 2147483648\n",
     "cus_per_domain: Input should be less than or equal to 1024"),
    ("l2.yaml", "base: mi300x\nl2_bytes_per_domain: 2199023255552\n",
     "l2_bytes_per_domain: Input should be less than or equal to 1073741824"),
    ("line.yaml", "base: mi300x\nline_bytes: 4096\n", "line_bytes: Input should be less than or equal to 1024"),
])
def test_a_hardware_spec_outside_physical_ranges_is_one_line(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(HardwareSpecError, match=message) as info:
        load_spec_file(path)
    assert "\n" not in str(info.value) and name in str(info.value)
