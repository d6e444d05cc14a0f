"""The `swizzleperf` command line's frame: the Typer app and its groups, the options the commands
share, and `main`, which turns every error into one line and an exit code.

Expected failures (SwizzlePerfError) become one red line and exit code 2, and so does anything
unexpected (an "internal error" line, never a traceback); set SWIZZLEPERF_DEBUG=1 or pass --debug
to see the traceback instead. `check` exits 1 for a rejected remap. The commands live in
kernel_commands (on a kernel: hw, check, profile, optimize, bench, sweep, adopt) and
store_commands (on what runs left: runs, export, library, apply, cache).
"""

from __future__ import annotations

import ast
import os
import sys
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from swizzleperf import __version__
from swizzleperf.errors import ContractError, RemapRejected, SwizzlePerfError
from swizzleperf.kernel import candidate
from swizzleperf.kernel.contract import KernelFile
from swizzleperf.untrusted import parse as untrusted
from swizzleperf.untrusted import source_text

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Find program-id remaps (swizzles) that raise the L2 hit rate of Triton kernels.")
runs_app = typer.Typer(no_args_is_help=True, help="Inspect run directories under runs/.")
app.add_typer(runs_app, name="runs")
library_app = typer.Typer(no_args_is_help=True, help="The swizzle library: remaps kept for reuse.")
app.add_typer(library_app, name="library")
cache_app = typer.Typer(help="The simulator's trace cache ($SWIZZLEPERF_CACHE).")
app.add_typer(cache_app, name="cache")
console = Console()
_state = {"debug": False}


def _debug_from_env() -> bool:
    return os.environ.get("SWIZZLEPERF_DEBUG", "") not in ("", "0")

HardwareOpt = typer.Option(None, "--hardware", "-H", help="preset name (see `swizzleperf hw`) or a .yaml/.json spec; "
                                                          "default: the local GPU, else mi300x")
ProfilerOpt = typer.Option("auto", "--profiler", help="auto (measured where a GPU and its profiler are here, "
                                                      "else simulated) | sim | ncu | rocprofv3")
ProposerOpt = typer.Option(None, "--proposer", help="search | llm | hybrid; default search, or llm with --model")
KernelArg = typer.Argument(..., metavar="KERNEL", help="a kernel file, or a name under kernels/ (softmax)")
RunsDirOpt = typer.Option(Path("runs"), "--runs-dir", help="where run directories live")
LibraryOpt = typer.Option(None, "--library", help="library directory (default ./swizzles or $SWIZZLEPERF_LIBRARY)")
AllowUnprovenOpt = typer.Option(False, "--allow-unproven", help="accept remaps whose z3 proof does not cover the "
                                "kernel's declared grids (marked UNPROVEN in the report, best/remap.py and a library)")


ContextTokensOpt = typer.Option(None, "--context-tokens", min=1, help="the model's context window in tokens (default: "
                                "what the server says, else 8192); with --resume it replaces the run's")
MaxTokensOpt = typer.Option(None, "--max-tokens", min=1, help="answer tokens per model call (default 1024 for the "
                            "analysis, 2048 per proposal); with --resume it replaces the run's")
WorkersOpt = typer.Option(None, "--workers", min=1, help="evaluate on a local process pool of N workers (1: in this "
                                                        "process); default one per core, at most 8")
RayOpt = typer.Option(None, "--ray", metavar="auto|ADDRESS", help="evaluate on a Ray cluster: auto (found, or started "
                                                                  "here) or its address; needs swizzleperf[ray]")
BatchOpt = typer.Option(4, "--batch", min=1, help="proposals made from one snapshot of the history and evaluated "
                                                  "together (an LLM proposes one at a time; a resumed run keeps "
                                                  "its own)")  # = optimize.DEFAULT_BATCH, not imported: it is heavy


def _print_version(value: bool) -> None:
    """--version, eager: it runs while the options are parsed, before click asks for a command."""
    if value:
        console.print(f"swizzleperf {__version__}")
        raise typer.Exit()


@app.callback()
def _main(debug: bool = typer.Option(False, "--debug", help="show tracebacks instead of one-line errors"),
          version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    _state["debug"] = debug or _debug_from_env()  # set on every invocation: one command's --debug is not the next's


def _remap_from_file(path: Path, kernel: KernelFile) -> str:
    """The candidate in a file (a bare remap, or a whole kernel file): the hook-named function, and the
    loop-order hook's beside it where the kernel has one and the file defines it, cut from the text the
    parser read. Raises RemapRejected for a file no remap could be in (too large, not UTF-8, too deep)."""
    try:
        text = untrusted.read_file(path)
    except OSError as exc:
        raise ContractError(f"cannot read remap file {path}: {exc.strerror}") from exc
    tree = untrusted.parse(text, untrusted.MAX_FILE_BYTES)  # a syntax error is reported with the file's line
    hooks = _defined(tree, kernel.hook.name)
    if not hooks:
        return text
    orders = _defined(tree, kernel.loop_order.name) if kernel.loop_order else []
    loop_order = source_text.function_text(text, orders[0]) if orders else None
    return candidate.join(source_text.function_text(text, hooks[0]), loop_order)


def _defined(tree: ast.Module, name: str) -> list[ast.FunctionDef]:
    """The top-level function `name` (a list of at most one; RemapRejected if the file defines it twice)."""
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    if len(found) > 1:
        lines = ", ".join(str(source_text.function_span(node)[0]) for node in found)
        raise RemapRejected("static", f"the file defines {name}() {len(found)} times (lines {lines}); keep one")
    return found


def _progress():
    from swizzleperf.cli.render import progress_bar
    return progress_bar(console)


def _capture_progress(progress):
    from swizzleperf.cli.render import capture_progress
    return capture_progress(progress)


@contextmanager
def _executor(workers: int | None, ray: str | None):
    """The executor --workers/--ray ask for (by default a process pool on a machine with several cores),
    stopped when the command ends."""
    from swizzleperf.loop.executors import make_executor
    executor = make_executor(workers, ray)
    try:
        yield executor
    finally:
        executor.close()




def main() -> None:
    _state["debug"] = _debug_from_env()
    try:
        app()  # typer turns Ctrl-C into exit status 130 (optimize says more: swizzleperf.workflows.optimize)
    except SwizzlePerfError as exc:
        if _state["debug"]:
            raise
        console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)  # one line in a pipe
        sys.exit(2)
    except Exception as exc:  # a bug, still one line and "could not" (2); --debug shows the traceback
        if _state["debug"]:
            raise
        what = untrusted.echo(f"{type(exc).__name__}: {exc}", 500)
        console.print(f"[red]internal error:[/] {escape(what)} (--debug shows the traceback)", highlight=False,
                      soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        sys.exit(130)
