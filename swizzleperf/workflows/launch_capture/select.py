"""Which recorded launches become the kernel file: the kernel the user names, or the only one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from swizzleperf.errors import CaptureError
from swizzleperf.kernel.launches import launch_record
from swizzleperf.kernel.launches.launch_record import LaunchRecord
from swizzleperf.untrusted import readback
from swizzleperf.workflows.launch_capture.session import by_kernel


def listing(groups: dict[str, list[LaunchRecord]]) -> list[tuple[str, int, str, str]]:
    """(kernel, launches, where, grids) per kernel, for the summary."""
    rows = []
    for name, records in groups.items():
        k = records[0].kernel
        grids = ", ".join(str(tuple(g for g in r.grid if g != 1) or (1,)).replace(",)", ")") for r in records[:4])
        rows.append((name, len(records), f"{Path(k.file).name}:{k.line}", grids + (", ..." if len(records) > 4 else "")))
    return rows


def choose(records: list[LaunchRecord], kernel: str | None, launch: int | None) -> tuple[str, list[LaunchRecord]]:
    """The kernel's launches to write (all its distinct launches, or the one `launch` picks)."""
    groups = by_kernel(records)
    if kernel is None:
        if len(groups) > 1:
            names = ", ".join(f"{n} ({len(v)})" for n, v in groups.items())
            raise CaptureError(f"{len(groups)} kernels were launched: {names}; pick one with --kernel NAME")
        kernel = next(iter(groups))
    if kernel not in groups:
        same = [n for n in groups if n.split("@")[0] == kernel]
        if len(same) > 1:
            raise CaptureError(f"two kernels are named {kernel}: {', '.join(same)}; pick one with --kernel NAME@FILE:LINE")
        if not same:
            raise CaptureError(f"no launch of a kernel named {kernel} was recorded (launched: {', '.join(groups)})")
        kernel = same[0]
    chosen = groups[kernel]
    if launch is not None:
        if not 0 <= launch < len(chosen):
            raise CaptureError(f"--launch {launch}: {kernel} has launches 0..{len(chosen) - 1}")
        chosen = [chosen[launch]]
    return kernel, chosen


@dataclass
class Launches:
    """A `.launches.json`: the command that launched the kernel, where, how it exited, and the launches."""

    command: list[str]
    cwd: Path
    returncode: int
    records: list[LaunchRecord]


def merged(earlier: list[LaunchRecord], new: list[LaunchRecord]) -> list[LaunchRecord]:
    """The launches of a kernel file and new ones of the same kernel (its source unchanged), without repeats."""
    if earlier[0].kernel.name != new[0].kernel.name:
        raise CaptureError(f"the kernel file holds {earlier[0].kernel.name}, not {new[0].kernel.name}: --add adds "
                           f"launches of the same kernel")
    if [f.source for f in earlier[0].closure.functions] != [f.source for f in new[0].closure.functions]:
        raise CaptureError(f"{new[0].kernel.name}'s source (or a helper's) changed since the kernel file was "
                           f"captured: capture it again without --add")
    seen = {_key(r) for r in earlier}
    return earlier + [r for r in new if _key(r) not in seen]


def _key(record: LaunchRecord) -> str:
    return json.dumps([record.grid, [p.model_dump(exclude={"values", "range", "sorted", "zeros", "written",
                                                            "in_place", "device"}) for p in record.params]])


def write_records(records: list[LaunchRecord], command: list[str], cwd: Path, returncode: int, path: Path) -> None:
    """The chosen launches, and the command that made them, as readable JSON beside the kernel file."""
    data = {"command": command, "cwd": str(cwd), "returncode": returncode,
            "launches": [r.model_dump(mode="json") for r in records]}
    path.write_text(json.dumps(data, indent=1) + "\n")


def read_records(path: Path) -> Launches:
    """A `.launches.json` read back (untrusted: each field and launch checked)."""
    try:
        data = readback.read_json(path, "the launches file", inside=path.resolve().parent)
    except OSError as exc:
        raise CaptureError(f"cannot read the launches file {path}: {exc.strerror}") from None
    except readback.StoredFileError as exc:
        raise CaptureError(str(exc)) from None
    if not (isinstance(data, dict) and isinstance(data.get("command"), list) and data["command"]
            and all(isinstance(a, str) for a in data["command"]) and isinstance(data.get("cwd"), str)
            and type(data.get("returncode", 0)) is int and isinstance(data.get("launches"), list)
            and data["launches"]):
        raise CaptureError(f"{path} is not a launches file (a command, its cwd and a list of launches)")
    records = [launch_record.parse(item, f"{path} launch {i}") for i, item in enumerate(data["launches"])]
    return Launches(command=data["command"], cwd=Path(data["cwd"]), returncode=data.get("returncode", 0),
                    records=records)
