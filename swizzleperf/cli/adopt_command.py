"""What `swizzleperf adopt` prints: what it wrote, how, and exactly what is left to the user."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from swizzleperf.workflows.adopt.rewrite import AdoptError, adopt


def default_output(module: Path) -> Path:
    return Path("kernels") / module.name


def run_adopt(module: Path, output: Path | None, force: bool, console: Console, kernel: str | None = None) -> int:
    """Adopt `module`; 0 when the file is complete, 1 when it was written with TODOs to fill in."""
    if not module.is_file():
        raise AdoptError(f"{module} does not exist (give the path of a Triton module)")
    out = output or default_output(module)
    if out.resolve() == module.resolve():
        raise AdoptError(f"-o {out} is the stock module itself; adopt never edits the original: pick another path")
    if out.exists() and not force:
        raise AdoptError(f"{out} already exists; pass --force to replace it, or -o to write elsewhere")
    done = adopt(module, out, kernel)
    say = lambda text: console.print(text, highlight=False)  # noqa: E731
    say(f"[green]✓[/] wrote {escape(str(out))} from {escape(str(module))} (the original is not changed)")
    say(f"  hook: {escape(done.hook)}")
    if done.pinned:
        say(f"  autotune: pinned {escape(done.pinned)}")
    if done.moved:
        shown = "; ".join(m if len(m) <= 40 else m[:39] + "…" for m in done.moved[:3]) + \
            ("; ..." if len(done.moved) > 3 else "")
        say(f"  moved under __main__ ({len(done.moved)} import-time statements: the CPU interpreter has no "
            f"active driver): {escape(shown)}")
    by_source: dict[str, list[str]] = {}
    for name, where in done.evidence.items():
        by_source.setdefault(where, []).append(name)
    for where, names in by_source.items():
        if where:
            say(f"  inferred {escape(', '.join(names))}: from {escape(where)}")
    if by_source.get(""):
        say(f"  guessed {escape(', '.join(by_source['']))}: nothing in the module says; edit them in "
            f"{escape(str(out))} if they are wrong")
    for note in done.notes:
        say(f"  note: {escape(note)}")
    for name, why in done.todos:
        say(f"[yellow]TODO[/] {escape(name)}: {escape(why)} (marked TODO(swizzleperf adopt) in the file)")
    say(f"next: swizzleperf check {escape(str(out))}")
    return 1 if done.todos else 0
