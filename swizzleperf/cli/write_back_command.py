"""`swizzleperf apply RUN|NAME --to MODULE [--write]`: the diff, and with --write the patch and its test."""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax


def run_write_back(ref: str, module: Path, kernel: str | None, runs_dir: Path, library: Path | None, write: bool,
                   console: Console) -> int:
    """0: shown (or written and its command passes); 1: written, its command failed, the module put back."""
    from swizzleperf.cli.capture_command import capture_settings
    from swizzleperf.workflows.launch_capture import apply_to
    source = apply_to.resolve(ref, runs_dir, library)
    patch = apply_to.prepare(source, module, kernel)
    say = lambda line: console.print(line, highlight=False)  # noqa: E731
    say(f"{escape(source.provenance)}\n{escape(str(module))}: {escape(patch.how)}")
    console.print(Syntax(patch.diff(), "diff", theme="ansi_dark"))
    if not write:
        say(f"nothing written ({escape(str(module))} is unchanged; --write applies the diff"
            + (" and re-runs the captured command)" if source.command else ")"))
        return 0
    module.write_text(patch.after)
    say(f"--write: wrote the remap into {escape(str(module))}")
    if source.command is None:
        say("no captured command to re-run (the run's kernel file was not captured): run your tests")
        return 0
    text = " ".join(source.command)
    settings = capture_settings(None, 0, None, record=False)
    with tempfile.TemporaryDirectory(prefix="swizzleperf-rerun-") as tmp, \
            console.status(f"re-running `{escape(text)}` against the patched module"):
        result = apply_to.rerun(source, settings, Path(tmp))
        tail = result.log_tail()
    if result.returncode == 0:
        say(f"[green]✓[/] `{escape(text)}` passes with the patched module (exit 0)")
        return 0
    if result.returncode == source.captured_returncode:
        say(escape(tail))
        say(f"[yellow]`{escape(text)}` fails as it did when it was captured (exit {result.returncode} both times; "
            f"its last lines above): those failures are the command's own, so this run cannot judge the patch, "
            f"which is kept; check it where the command passes[/]")
        return 0
    module.write_text(patch.before)
    say(escape(tail))
    say(f"[red]✗[/] `{escape(text)}` fails with the patched module (exit {result.returncode}; its last lines "
        f"above): {escape(str(module))} is put back as it was")
    return 1
