"""The floor plan (docs/architecture.md): imports follow the data flow, names do not collide, and the
repository names no file it does not contain.

The import graph is built from the syntax trees of swizzleperf/ (every `from swizzleperf... import`,
at module level or inside a function, but not under `if TYPE_CHECKING:`, which never runs): a module
is a node, an import an edge to the module that defines the imported name. `python tests/test_architecture.py` prints the graph's back imports and
circles.
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "swizzleperf"

# Bottom to top. The package root holds only its version and a table of names loaded on use, so it is
# the bottom floor; `__main__` is the top.
FLOORS = ["__init__", "errors", "untrusted", "kernel", "hardware", "records", "remaps", "validation", "sim",
          "profilers", "proposers", "loop", "workflows", "lab", "cli", "__main__"]
# Basenames that mean the same thing in each folder they appear in: a plug-in family's protocol and
# registry, a child-process entry point, a command's output writer, a selection by name or "auto", and
# the simulator (its package, and its profiler backend). Any other repeated basename is a collision.
SHARED_BASENAMES = {"__init__", "base", "registry", "child", "output", "select", "sim"}


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def import_graph() -> dict[str, set[str]]:
    mods = modules()

    def defining(name: str) -> str:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    edges: dict[str, set[str]] = defaultdict(set)
    for module, path in mods.items():
        for node in _runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("swizzleperf"):
                for alias in node.names:
                    target = defining(f"{node.module}.{alias.name}")
                    if target and target != module:
                        edges[module].add(target)
    return edges


def _runtime_nodes(tree: ast.AST):
    """Every node of `tree` except those under `if TYPE_CHECKING:` (imports for annotations only)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for child in node.orelse:
                yield child
                yield from _runtime_nodes(child)
            continue
        yield node
        yield from _runtime_nodes(node)


def floor(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def back_imports(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((a, b) for a, targets in edges.items() for b in targets
                  if FLOORS.index(floor(b)) > FLOORS.index(floor(a)))


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    edges = defaultdict(set, edges)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(set(edges) | {t for targets in list(edges.values()) for t in targets}):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def folder(module: str) -> str:
    return module.rpartition(".")[0]


def test_every_module_sits_on_a_floor():
    assert {floor(m) for m in modules()} <= set(FLOORS)
    assert {p.name for p in PACKAGE.glob("*.py")} == {"__init__.py", "__main__.py", "errors.py"}


def test_no_import_runs_back_up_the_data_flow():
    assert back_imports(import_graph()) == []


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_the_detectors_find_a_circle_and_an_import_for_annotations_only():
    """The checks themselves, on a graph and a module made up for them."""
    made_up = {"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}, "p.d": {"p.a"}}
    assert circles(made_up) == [["p.a", "p.b", "p.c"]]
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from x import A\nelse:\n"
                     "    from y import B\nfrom z import C\n")
    assert [n.module for n in _runtime_nodes(tree) if isinstance(n, ast.ImportFrom)] == ["typing", "y", "z"]


def test_no_two_modules_share_a_basename_with_different_meanings():
    by_name = defaultdict(list)
    for module in modules():
        by_name[module.rpartition(".")[2]].append(module)
    repeated = {name: mods for name, mods in by_name.items() if len(mods) > 1 and name not in SHARED_BASENAMES}
    assert repeated == {}


def test_only_the_command_line_speaks_rich_and_typer():
    """Below cli/, progress and results leave through callbacks and return values, never a console."""
    speaking = sorted(module for module, path in modules().items() if floor(module) != "cli" and any(
        isinstance(n, (ast.Import, ast.ImportFrom)) and any(
            (getattr(n, "module", None) or alias.name).split(".")[0] in ("rich", "typer") for alias in n.names)
        for n in ast.walk(ast.parse(path.read_text()))))
    assert speaking == []


def test_the_package_root_imports_nothing_of_its_own():
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("swizzleperf")]


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / f for f in listed if f.endswith((".md", ".py", ".sh", ".toml")) and (ROOT / f).exists()]


# Example names in the docs and in tests that write such files themselves.
PLACEHOLDERS = {"x", "K", "NAME", "my_matmul", "rowsum", "probe_", "test_op", "rmsnorm", "test_rmsnorm"}
# a mention followed by `{` is a shell brace pattern (repeat{1,2}-h100.json): its prefix must match a file
PATH_MENTION = re.compile(r"(?<![\w./-])((?:swizzleperf|benchmarks|kernels|tests|docs)/[\w./-]*[\w/*])(\{?)")


def test_the_repository_names_no_file_it_does_not_contain():
    """Paths of the repository's own folders mentioned in its text (docs, docstrings, comments) exist."""
    missing = []
    for path in _tracked_text_files():
        for mention, brace in PATH_MENTION.findall(path.read_text(errors="replace")):
            target = mention.rstrip("./") + "*" * bool(brace)
            if Path(target).stem in PLACEHOLDERS:
                continue
            if not any(next(base.glob(target), None) is not None for base in (ROOT, path.parent)):
                missing.append(f"{path.relative_to(ROOT)}: {mention}")
    assert missing == []


def test_nothing_cites_a_design_document_outside_the_repository():
    cites = [str(p.relative_to(ROOT)) for p in _tracked_text_files()
             if re.search(r"\bDESIGN\.md|\bSTYLE\.md|\.\./shared", p.read_text(errors="replace"))
             and p.name != "test_architecture.py"]
    assert cites == []


if __name__ == "__main__":
    graph = import_graph()
    for a, b in back_imports(graph):
        print(f"back: {a} -> {b}")
    for component in circles(graph):
        print("circle:", " ".join(component))
    print(f"{len(modules())} modules, {sum(len(t) for t in graph.values())} imports, "
          f"{len(back_imports(graph))} back, {len(circles(graph))} circles")
