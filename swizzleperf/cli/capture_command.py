"""`swizzleperf capture -- COMMAND`: record the launches of the user's own code, write a kernel file."""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from swizzleperf.cli.app import HardwareOpt, app, console
from swizzleperf.errors import CaptureError
from swizzleperf.kernel.launches.recorder import FAILED


@app.command("capture", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def capture_command(
        command: list[str] = typer.Argument(..., metavar="-- COMMAND...", help="the command that launches the "
                                            "kernel, as you run it (python -m pytest tests/test_op.py -k fwd)"),
        output: Optional[Path] = typer.Option(None, "-o", "--output", help="the kernel file to write "
                                              "(default kernels/<kernel>.py)"),
        kernel: Optional[str] = typer.Option(None, "--kernel", help="the kernel to capture (its function name); "
                                             "needed when the command launches several"),
        launch: Optional[int] = typer.Option(None, "--launch", help="capture only this launch of the kernel "
                                             "(0-based, as listed); default every distinct launch, one size each"),
        config: int = typer.Option(0, "--config", min=0, help="on the CPU: the autotune config to run (0 = the "
                                   "first left after pruning; the interpreter never benchmarks them all)"),
        hw_name: Optional[str] = HardwareOpt,
        add: bool = typer.Option(False, "--add", help="add these launches to the kernel file -o names (as more "
                                 "sizes): say, your tests' small launches for the CPU beside a GPU benchmark's"),
        force: bool = typer.Option(False, "--force", help="replace an existing output file")) -> None:
    """Run your own command with Triton's launches recorded, and write a kernel file from one kernel's launches.

    Exit status: 0 written; 2 nothing written (no launch recorded, an ambiguous kernel, a kernel that
    cannot stand alone).
    """
    from swizzleperf.workflows.launch_capture import kernel_file, select, verify
    if add and (output is None or not output.with_suffix(".launches.json").exists()):
        raise CaptureError("--add needs -o naming a kernel file that capture wrote (its .launches.json beside it)")
    if output is not None and output.exists() and not force and not add:
        raise CaptureError(f"{output} already exists; pass --force to replace it, or -o to write elsewhere")
    settings = capture_settings(kernel, config, hw_name)
    text = shlex.join(command)
    with tempfile.TemporaryDirectory(prefix="swizzleperf-capture-") as tmp:
        captured = _run(command, Path(tmp), settings, text)
        _require_launches(captured, text, kernel)
        _summary(captured, text)
        name, chosen = select.choose(captured.records, kernel or _ask(captured), launch)
    out = output or Path("kernels") / f"{chosen[0].kernel.name.strip('_')}.py"
    if add:
        chosen = select.merged(select.read_records(out.with_suffix(".launches.json")).records, chosen)
    elif out.exists() and not force:
        raise CaptureError(f"{out} already exists; pass --force to replace it, or -o to write elsewhere")
    written = kernel_file.write_kernel_file(chosen, out, text)
    records_path = out.with_suffix(".launches.json")
    select.write_records(chosen, command, Path.cwd(), captured.returncode, records_path)
    with console.status("replaying the kernel file against the kernel's own outputs"):
        compared, differences = verify.verify(out, chosen, written.sizes, "cuda" if settings.gpu else "cpu")
    _report(out, name, chosen, written, records_path, compared, differences)


def _require_launches(captured, text: str, kernel: Optional[str]) -> None:
    """One line, and the command's last lines, when it launched nothing (or failed in its first launch)."""
    failed = next((n[len(FAILED):] for n in captured.notes if n.startswith(FAILED)), None)
    if captured.returncode != 0:
        console.print(escape(captured.log_tail()), highlight=False)
    if captured.returncode != 0 and not captured.records:
        if failed:
            raise CaptureError(f"`{text}` exited {captured.returncode}: the launch of {failed}")
        raise CaptureError(f"`{text}` exited {captured.returncode} before any Triton launch (its last lines "
                           f"are above)")
    if captured.returncode != 0:
        console.print(f"[yellow]`{escape(text)}` exited {captured.returncode} after its launches were recorded "
                      f"(its last lines are above); the kernel file is written from them[/]", highlight=False)
    if not captured.records:
        raise CaptureError(f"`{text}` ran (exit 0) but launched no Triton kernel"
                           + (f" named {kernel}" if kernel else "") + "; give a command that launches it")


def _report(out: Path, name: str, chosen, written, records_path: Path, compared: int, differences: list[str]) -> None:
    """What was written, how the hook went in, whether the file replays the kernel, and who chose the constexprs."""
    say = lambda line: console.print(line, highlight=False)  # noqa: E731
    say(f"[green]✓[/] wrote {escape(str(out))} from {len(chosen)} launch{'es' * (len(chosen) > 1)} of {escape(name)} "
        f"(sizes: {escape(', '.join(written.sizes))}); the launches: {escape(str(records_path))}")
    say(f"  hook: {escape(written.hook)}")
    if differences:
        for line in differences:
            say(f"[red]✗[/] {escape(line)}")
        raise CaptureError(f"{out} does not reproduce {name} ({len(differences)} outputs differ on the recorded "
                           f"launches); it is kept for inspection, with its launches")
    if compared:
        say(f"[green]✓[/] replayed: under its own hook the kernel file writes the same bits as {escape(name)} on "
            f"{compared} recorded launch{'es' * (compared > 1)}")
    for c in chosen[0].chosen:
        say(f"  {escape(c.by)}: {escape(c.config or str(c.values))} ({escape(c.how)})")
    tuned = {k for c in chosen[0].chosen for k in c.values}
    passed = [f"{p.name}={p.value}" for p in chosen[0].params if p.constexpr and p.name not in tuned]
    if passed:
        say(f"  constexprs as the caller passed them (a library's own tuner, if any, chose them), pinned per size: "
            f"{escape(', '.join(passed))}")
    say(f"next: swizzleperf check {escape(str(out))}")


_ARCH = {"mi300x": "gfx942", "mi325x": "gfx942", "mi355x": "gfx950", "h100": 90, "h200": 90, "gb10": 121}


def capture_settings(kernel: Optional[str], config: int, hw_name: Optional[str], record: bool = True):
    """What the child needs: the kernel to record, the CPU config, the SM count the stand-ins report."""
    import torch

    from swizzleperf.hardware.select import resolve as resolve_hardware
    from swizzleperf.workflows.launch_capture.session import CaptureSettings
    spec, _ = resolve_hardware(hw_name)
    return CaptureSettings(kernel=kernel.split("@")[0] if kernel else None, config=config,
                           sm_count=spec.num_domains * spec.cus_per_domain, gpu=torch.cuda.is_available(),
                           vendor=spec.vendor, arch=_ARCH.get(spec.name, "gfx942" if spec.vendor == "amd" else 90),
                           preset=spec.name,
                           record=record)


def _run(command: list[str], folder: Path, settings, text: str):
    from swizzleperf.workflows.launch_capture import session
    where = "on the GPU" if settings.gpu else "on Triton's CPU interpreter, with stand-ins for the GPU"
    with console.status(f"running `{escape(text)}` {where}") as status:
        def progress(launches: int, seconds: float) -> None:
            status.update(f"running `{escape(text)}` {where}: {launches} launch{'es' * (launches != 1)} recorded, "
                          f"{seconds:.0f} s")
        return session.run_command(command, folder, settings, progress)


def _interactive() -> bool:
    return sys.stdin.isatty()


def _ask(captured) -> Optional[str]:
    """At a terminal, which kernel to write when the command launched several (elsewhere: the error says)."""
    from swizzleperf.workflows.launch_capture.session import by_kernel
    names = list(by_kernel(captured.records))
    if len(names) < 2 or not _interactive():
        return None
    for i, name in enumerate(names, 1):
        console.print(f"  [bold]{i}[/] {escape(name)}", highlight=False)
    while not 1 <= (pick := typer.prompt(f"which kernel? 1-{len(names)}", type=int)) <= len(names):
        console.print(f"  a number from 1 to {len(names)}")
    return names[pick - 1]


def _summary(captured, text: str) -> None:
    from swizzleperf.workflows.launch_capture import select, session
    groups = session.by_kernel(captured.records)
    status = "[green]exited 0[/]" if captured.returncode == 0 else f"[yellow]exited {captured.returncode}[/]"
    console.print(f"`{escape(text)}` {status}; {len(captured.records)} distinct launches of {len(groups)} "
                  f"kernel{'s' * (len(groups) > 1)} recorded on {escape(captured.records[0].device)}:", highlight=False)
    table = Table(box=None, padding=(0, 2), show_edge=False)
    for col in ("kernel", "launches", "defined at", "grids"):
        table.add_column(col)
    for row in select.listing(groups):
        table.add_row(*(escape(str(v)) for v in row))
    console.print(table)
    for line in captured.notes:
        console.print(f"  [dim]{escape(line)}[/]", highlight=False)
    for line in captured.refused:
        console.print(f"  [yellow]refused:[/] {escape(line)}", highlight=False)
