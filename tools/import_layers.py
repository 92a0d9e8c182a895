"""The import contract of the workspace: packages in layers, no import circles.

Reads every module under `packages/*/src` (its source, with `ast`: nothing is
imported) and checks two rules:

1. **Layers.** A package imports only packages of a lower layer (`LAYERS`,
   lowest first); the packages of one layer are independent of each other.
   `ffi_core` is lowest; `kernel_check` (where it is installed) sits above it;
   the bridges above those; `xla_custom_kernel` above the bridges;
   `kernel_bench` on top. Every import counts here, also one inside a function
   (an upward import is upward wherever it is written).
2. **No circles.** Inside a package, the modules do not import each other in a
   circle, directly or through a chain. Every import counts, at module level
   and inside functions: a lazy import only postpones the circle to the first
   call. Imports under `if TYPE_CHECKING:` do not count (they never run).
   Importing `a.b.c` also runs `a/b/__init__.py`: an import of a module is an
   import of the packages above it too (not of the importer's own packages,
   which are already being imported).

`EXCEPTIONS` lists the circles known and accepted for now, each by its modules;
a listed circle that no longer exists is reported too, so the list only
shrinks.

    uv run python tools/import_layers.py          # exit 1 on a broken rule
    uv run python tools/import_layers.py --graph  # print the package graph
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import sys
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "packages"

#: The layers, lowest first; a package may import only from layers below its
#: own. A package named here that is not in the tree is skipped.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("ffi_core",),
    ("kernel_check",),
    ("numba_cpu_ffi", "numba_cuda_ffi", "warp_ffi", "triton_ffi", "cuda_source_ffi"),
    ("xla_custom_kernel",),
    ("kernel_bench",),
)

#: Import circles accepted for now, each the set of modules of one strongly
#: connected part of the import graph (the modules that reach each other).
EXCEPTIONS: tuple[frozenset[str], ...] = ()


def _modules(packages: pathlib.Path = PACKAGES) -> dict[str, pathlib.Path]:
    found: dict[str, pathlib.Path] = {}
    for src in sorted(packages.glob("*/src")):
        for path in sorted(src.rglob("*.py")):
            parts = path.relative_to(src).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    # Every import statement except those under `if TYPE_CHECKING:`.
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from (n for child in node.orelse for n in _imports_in(child))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node)


def _imports_in(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    yield from _imports(node)


def _targets(
    name: str, is_package: bool, node: ast.Import | ast.ImportFrom, modules: set[str]
) -> Iterator[str]:
    # The in-tree modules an import statement runs.
    if isinstance(node, ast.Import):
        bases = [alias.name for alias in node.names]
        names: list[str] = []
    else:
        if node.level:
            package = name if is_package else name.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{node.module}" if node.module else package
        else:
            base = node.module or ""
        bases = [base]
        names = [f"{base}.{alias.name}" for alias in node.names]
    for target in [*bases, *names]:
        if target in modules:
            yield target


def _graph(modules: dict[str, pathlib.Path]) -> dict[str, set[str]]:
    known = set(modules)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 2)}
        for node in _imports(tree):
            for target in _targets(name, path.name == "__init__.py", node, known):
                parts = target.split(".")
                # The target and the packages above it, all run by the import.
                for i in range(1, len(parts) + 1):
                    step = ".".join(parts[:i])
                    if step in known and step not in own:
                        graph[name].add(step)
    return graph


def _strongly_connected(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    # Tarjan's algorithm, iterative; the parts with more than one module.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    parts: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.add(member)
                    if member == node:
                        break
                if len(part) > 1:
                    parts.append(frozenset(part))
    return parts


def _cycle(graph: dict[str, set[str]], part: frozenset[str]) -> list[str]:
    # One circle through the part's first module, for the message.
    start = min(part)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node] & part):
            if child == start:
                return [*paths[node], start]
            if child not in paths:
                paths[child] = [*paths[node], child]
                queue.append(child)
    return [start]


def _layer_problems(graph: dict[str, set[str]]) -> list[str]:
    rank = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}
    problems = []
    for name, targets in sorted(graph.items()):
        top = name.split(".")[0]
        for target in sorted(targets):
            other = target.split(".")[0]
            if other == top:
                continue
            if top not in rank or other not in rank:
                unknown = top if top not in rank else other
                problems.append(f"{name} -> {target}: package {unknown!r} has no layer in LAYERS")
            elif rank[other] >= rank[top]:
                how = "the same layer" if rank[other] == rank[top] else "a higher layer"
                problems.append(f"{name} imports {target}, of {how}")
    return problems


def check(
    packages: pathlib.Path = PACKAGES, exceptions: tuple[frozenset[str], ...] = EXCEPTIONS
) -> list[str]:
    """Every broken rule of the tree under ``packages``, in words (none: the
    contract holds); ``exceptions`` are the circles accepted."""
    graph = _graph(_modules(packages))
    problems = _layer_problems(graph)
    parts = _strongly_connected(graph)
    for part in sorted(parts, key=min):
        if part not in exceptions:
            problems.append("import circle: " + " -> ".join(_cycle(graph, part)))
    for stale in exceptions:
        if stale not in parts:
            problems.append(
                f"EXCEPTIONS lists a circle that is gone (remove it): {', '.join(sorted(stale))}"
            )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", action="store_true", help="print the package graph")
    args = parser.parse_args(argv)
    if args.graph:
        edges: set[tuple[str, str]] = set()
        for name, targets in _graph(_modules()).items():
            edges |= {(name.split(".")[0], t.split(".")[0]) for t in targets}
        for a, b in sorted(e for e in edges if e[0] != e[1]):
            print(f"{a} -> {b}")
    problems = check()
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} broken import rule(s); see tools/import_layers.py")
        return 1
    print("import layers and circles: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
