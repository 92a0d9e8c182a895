"""No package reaches into a private module of another: what one package imports
from another is a public or kit name (`ffi_core.bridge`, `ffi_core.abi`,
`ffi_core.export`, ...), never a dotted path with a `_private` part. Import
statements and the import lines of generated source (string constants) count.
And ffi-core reads blobs in one layer: `flatbuffers` is imported only under
`ffi_core/export/`."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())
TOPS = {p.name.replace("-", "_"): p for p in PACKAGES}

# (file, private path) -> the public name it waits for. Each entry must still be
# needed: one that matches nothing fails the test, so the list only shrinks.
PENDING: dict[tuple[str, str], str] = {}


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    """Each absolute import of a module, or of a name from one, with its line."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            # Generated source: its import lines are imports too.
            for offset, line in enumerate(node.value.splitlines()):
                words = line.split()
                if len(words) >= 2 and words[0] in ("import", "from") and words[1][0].isalpha():
                    module = words[1].rstrip(",")
                    found.append((node.lineno + offset, module))
                    if words[0] == "from" and len(words) >= 4 and words[2] == "import":
                        names = " ".join(words[3:]).strip("()").split(",")
                        found += [
                            (node.lineno + offset, f"{module}.{n.split()[0]}")
                            for n in names
                            if n.strip() and n.split()[0] not in ("*", "\\")
                        ]
    return found


def private_imports(root: pathlib.Path = ROOT) -> list[tuple[str, int, str]]:
    """`(file, line, dotted path)` for each import of another package's private module
    (the first private path a line imports)."""
    problems: dict[tuple[str, int], str] = {}
    for top, package in sorted(TOPS.items()):
        for path in sorted((package / "src").rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for line, dotted in _imported(ast.parse(path.read_text(), filename=rel)):
                other = dotted.split(".")[0]
                if other in TOPS and other != top and _private(dotted):
                    problems.setdefault((rel, line), dotted)
    return [(rel, line, dotted) for (rel, line), dotted in problems.items()]


def test_no_package_imports_a_private_module_of_another():
    found = private_imports()
    offending = [
        f"{rel}:{line}: imports {dotted}, private to {dotted.split('.')[0]}"
        for rel, line, dotted in found
        if (rel, dotted) not in PENDING
    ]
    assert not offending, (
        "A package imports another package's private module (a dotted path with a "
        "`_` part); import a public or kit name instead (ffi_core.abi, ffi_core.bridge, "
        "ffi_core.export, ...), exporting it there if it is not yet:\n" + "\n".join(offending)
    )
    stale = sorted(set(PENDING) - {(rel, dotted) for rel, _, dotted in found})
    assert not stale, f"allowed private imports no longer made (remove them from PENDING): {stale}"


def test_the_check_finds_a_private_import(tmp_path):
    # The same walk over a planted package: import statements and generated source.
    source = tmp_path / "packages" / "numba-cpu-ffi" / "src" / "numba_cpu_ffi" / "_x.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "import ffi_core.bridge\n"
        "from ffi_core import __version__\n"
        "from ffi_core.cuda import _op\n"
        "CODE = '''\nfrom ffi_core._capi import ErrorCode\n'''\n"
        "from numba_cpu_ffi._spec import KernelInfo\n"
    )
    found = [
        (line, dotted)
        for line, dotted in _imported(ast.parse(source.read_text()))
        if dotted.split(".")[0] != "numba_cpu_ffi" and _private(dotted)
    ]
    assert found == [
        (3, "ffi_core.cuda._op"),
        (5, "ffi_core._capi"),
        (5, "ffi_core._capi.ErrorCode"),
    ]


@pytest.mark.parametrize("package", sorted(TOPS))
def test_flatbuffers_only_in_ffi_core_export(package):
    src = TOPS[package] / "src"
    outside = [
        f"{path.relative_to(ROOT).as_posix()}:{line}"
        for path in sorted(src.rglob("*.py"))
        if not (package == "ffi_core" and "export" in path.relative_to(src).parts[1:2])
        for line, dotted in _imported(ast.parse(path.read_text()))
        if dotted.split(".")[0] == "flatbuffers"
    ]
    assert not outside, f"flatbuffers imported outside ffi_core/export/: {outside}"
