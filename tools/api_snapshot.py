"""The public API of each package, written down: `packages/<pkg>/api.txt`.

The public API of a package is the `__all__` of its top module and of every
public module below it (no leading underscore in its dotted name; a module
named in an `__all__`, such as `ffi_core.abi.capi`, counts too). Each name is one
line: a function with its signature, a class with its bases and constructor
signature and, indented below it, its public methods, properties and
attributes; anything else with its type. A name that moved and still resolves
at its old place with a DeprecationWarning (a module's `_MOVED` table: old name
-> new module) is listed there too, described as at its new place and marked
`    deprecated: moved to <new module>`; a name with a new name (a module's
`_RENAMED` table: old name -> (module, new name), or -> new name in the same
module) likewise, marked
`    deprecated: renamed to <module>.<new name>`. tests-integration/test_public_api.py
compares the live API with the file and fails on any difference, and requires
an entry in the package's CHANGELOG "Unreleased" section while the API differs
from the one last released (the digest in the file's header, which
`tools/release.py bump` moves forward).

    uv run python tools/api_snapshot.py --write            # every package
    uv run python tools/api_snapshot.py --write ffi-core   # one package
    uv run python tools/api_snapshot.py --check            # exit 1 on a difference
    uv run python tools/api_snapshot.py                    # print, write nothing
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import enum
import functools
import hashlib
import importlib
import inspect
import pathlib
import pkgutil
import re
import sys
import types
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "packages"
SNAPSHOT = "api.txt"
REGENERATE = "uv run python tools/api_snapshot.py --write"
# Memory addresses in default values' reprs change from run to run.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_HEADER_VERSION = "# version: "
_HEADER_RELEASED = "# released-digest: "


def import_name(package: str) -> str:
    """The import name of a workspace package (`ffi-core` -> `ffi_core`)."""
    return package.replace("-", "_")


def workspace_packages() -> list[str]:
    """Every package folder under packages/, sorted."""
    return sorted(p.name for p in PACKAGES.iterdir() if (p / "pyproject.toml").is_file())


def snapshot_path(package: str, root: pathlib.Path = ROOT) -> pathlib.Path:
    return root / "packages" / package / SNAPSHOT


def moved(module: types.ModuleType) -> dict[str, str]:
    """The module's moved names (old name -> the module that holds it now)."""
    return dict(getattr(module, "_MOVED", {}))


def renamed(module: types.ModuleType) -> dict[str, tuple[str, str]]:
    """The module's renamed names (old name -> (module, new name); a table
    giving only the new name keeps the module)."""
    table = getattr(module, "_RENAMED", {})
    return {
        old: (module.__name__, new) if isinstance(new, str) else tuple(new)
        for old, new in table.items()
    }


def _resolve(module: types.ModuleType, attr: str) -> object:
    """The value of `module.attr`, taken from its new place when it moved or
    was renamed (no warning)."""
    new = moved(module).get(attr)
    if new is not None:
        return getattr(importlib.import_module(new), attr)
    new_place = renamed(module).get(attr)
    if new_place is not None:
        return getattr(importlib.import_module(new_place[0]), new_place[1])
    return getattr(module, attr, None)


def _is_public(dotted: str) -> bool:
    return not any(part.startswith("_") for part in dotted.split("."))


def public_modules(top: str) -> Iterator[tuple[str, types.ModuleType | ImportError]]:
    """The public modules of package `top` by the names users import them under,
    each with the module or the ImportError its import raised (an optional
    dependency that is not installed)."""
    seen: set[str] = set()
    pending = [(top, top)]
    while pending:
        public, real = pending.pop(0)
        if public in seen:
            continue
        seen.add(public)
        try:
            module = importlib.import_module(real)
        except ImportError as exc:
            yield public, exc
            continue
        yield public, module
        found = {}
        if hasattr(module, "__path__"):
            for info in pkgutil.iter_modules(module.__path__):
                if _is_public(info.name):
                    found[f"{public}.{info.name}"] = f"{real}.{info.name}"
        # A shim module's names warn on access: they are listed as moved, not imported.
        names = () if hasattr(module, "__moved_to__") else getattr(module, "__all__", ())
        for attr in [*names, *moved(module)]:
            value = _resolve(module, attr)
            if isinstance(value, types.ModuleType) and value.__name__.startswith(top + "."):
                found[f"{public}.{attr}"] = value.__name__  # `ffi_core.abi.capi` is `_capi`
        pending += sorted(item for item in found.items() if item[0] not in seen)


def _public_names(module: types.ModuleType) -> list[str]:
    if hasattr(module, "__all__"):
        return sorted(module.__all__)
    # A public module without __all__: what it defines itself.
    return sorted(
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and getattr(value, "__module__", None) == module.__name__
        and (inspect.isclass(value) or inspect.isfunction(value))
    )


def _signature(obj: object) -> str | None:
    for candidate in (obj, getattr(obj, "py_func", None), getattr(obj, "__wrapped__", None)):
        if candidate is None:
            continue
        try:
            return _ADDRESS.sub("", str(inspect.signature(candidate)))
        except (TypeError, ValueError):
            continue
    return None


def _owned(cls: type, top: str) -> list[type]:
    """The classes in `cls`'s MRO that belong to package `top`."""
    return [k for k in cls.__mro__ if k.__module__.split(".")[0] == top]


def _constructor(cls: type, top: str) -> str:
    # Only a constructor the package wrote: inherited ones (Exception's, Enum's)
    # print differently from one Python to the next and are not ours to promise.
    for klass in cls.__mro__:
        if "__init__" in vars(klass) or "__new__" in vars(klass):
            if (
                klass.__module__.split(".")[0] != top
                or issubclass(cls, enum.Enum)
                or getattr(cls, "_is_protocol", False)
            ):
                return ""
            return _signature(cls) or ""
    return ""


def _fields(cls: type) -> set[str]:
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls)}
    return set(getattr(cls, "_fields", ()))  # a NamedTuple


def _describe_class(qualified: str, cls: type, top: str) -> list[str]:
    bases = ", ".join(
        f"{b.__module__}.{b.__qualname__}" if b.__module__ != "builtins" else b.__qualname__
        for b in cls.__bases__
        if b is not object
    )
    lines = [f"class {qualified}" + (f"({bases})" if bases else "")]
    constructor = _constructor(cls, top)
    if constructor:
        lines.append(f"    {constructor}")
    if issubclass(cls, enum.Enum):
        lines += [f"    .{member.name} = {member.value!r}" for member in cls]
    owners = _owned(cls, top)
    fields = _fields(cls)  # in the constructor's signature already
    for name in sorted(dir(cls)):
        if (name.startswith("_") and name != "__call__") or name in fields:
            continue
        owner = next((k for k in cls.__mro__ if name in vars(k)), None)
        if owner not in owners:
            continue
        raw = vars(owner)[name]
        if issubclass(cls, enum.Enum) and isinstance(raw, cls):
            continue
        if isinstance(raw, (property, functools.cached_property)):
            lines.append(f"    .{name}: property")
        elif isinstance(raw, staticmethod):
            lines.append(f"    .{name}{_signature(raw.__func__) or ''}  [staticmethod]")
        elif isinstance(raw, classmethod):
            lines.append(f"    .{name}{_signature(getattr(cls, name)) or ''}  [classmethod]")
        elif inspect.isfunction(raw):
            lines.append(f"    .{name}{_signature(raw) or ''}")
        else:
            lines.append(f"    .{name}: {type(raw).__name__}")
    return lines


def describe(qualified: str, obj: object, top: str) -> list[str]:
    """The snapshot lines of one public name."""
    if inspect.isclass(obj):
        return _describe_class(qualified, obj, top)
    if isinstance(obj, types.ModuleType):
        return [f"module {qualified}"]
    if isinstance(obj, (types.GenericAlias, types.UnionType)) or type(obj).__module__ in (
        "typing",
        "collections.abc",
    ):
        return [f"{qualified} = {obj!r}"]  # a type alias
    if callable(obj) and not isinstance(obj, (int, float, str, bytes, tuple, list, dict)):
        signature = _signature(obj)
        if signature is not None:
            return [f"def {qualified}{signature}"]
    return [f"{qualified}: {type(obj).__name__}"]


def api_sections(package: str) -> dict[str, list[str] | str]:
    """Each public module of `package` with its snapshot lines, or the reason it
    could not be imported (a string)."""
    top = import_name(package)
    sections: dict[str, list[str] | str] = {}
    for name, module in public_modules(top):
        if isinstance(module, ImportError):
            sections[name] = f"not importable here: {module}"
            continue
        moved_to = getattr(module, "__moved_to__", None)
        if moved_to is not None:
            forwarded = getattr(module, "_NAMES", {})
            sections[name] = [
                f"{name}.{attr} -> {moved_to}.{forwarded.get(attr, attr)}  [deprecated]"
                for attr in _public_names(module)
            ]
            continue
        lines = []
        old = moved(module)
        old_names = renamed(module)
        for attr in sorted({*_public_names(module), *old, *old_names}):
            if attr == "__version__":
                continue  # the version is in the header; it changes with every release
            lines += describe(f"{name}.{attr}", _resolve(module, attr), top)
            if attr in old:
                lines.append(f"    deprecated: moved to {old[attr]}")
            if attr in old_names:
                new_module, new_name = old_names[attr]
                lines.append(f"    deprecated: renamed to {new_module}.{new_name}")
        sections[name] = lines
    return sections


def body_text(sections: dict[str, list[str]]) -> str:
    """The API part of a snapshot (everything below the header)."""
    out = []
    for name in sorted(sections):
        out.append(f"[{name}]")
        out += sections[name]
        out.append("")
    return "\n".join(out)


def digest(body: str) -> str:
    """The digest a header's `released-digest` holds (tools/release.py computes it too)."""
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def file_body(text: str) -> str:
    """A snapshot file less its header: what `digest` is taken of."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    return "".join(lines[start:]).lstrip("\n")


def parse(text: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """A snapshot file's header fields and its sections."""
    header: dict[str, str] = {}
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(_HEADER_VERSION):
            header["version"] = line[len(_HEADER_VERSION) :].strip()
        elif line.startswith(_HEADER_RELEASED):
            header["released-digest"] = line[len(_HEADER_RELEASED) :].strip()
        elif line.startswith("#"):
            continue
        elif line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
        elif line and current is not None:
            current.append(line)
    return header, sections


def render(package: str, version: str, released: str, sections: dict[str, list[str]]) -> str:
    return (
        f"# The public API of {package}: checked by tests-integration/test_public_api.py.\n"
        f"# Written by `{REGENERATE} {package}`; do not edit by hand.\n"
        f"{_HEADER_VERSION}{version}\n"
        f"{_HEADER_RELEASED}{released}\n"
        "\n" + body_text(sections)
    )


def package_version(package: str, root: pathlib.Path = ROOT) -> str:
    path = root / "packages" / package / "src" / import_name(package) / "_version.py"
    match = re.search(r'__version__\s*=\s*"([^"]+)"', path.read_text())
    if match is None:
        raise ValueError(f'{path} has no `__version__ = "..."` line')
    return match.group(1)


def live_sections(package: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The importable sections of the live API, and the reason for each other one."""
    live = api_sections(package)
    sections = {k: v for k, v in live.items() if isinstance(v, list)}
    missing = {k: v for k, v in live.items() if isinstance(v, str)}
    return sections, missing


def write(package: str) -> str:
    """Write the package's snapshot; return the diff against the previous one."""
    sections, missing = live_sections(package)
    path = snapshot_path(package)
    old_text = path.read_text() if path.exists() else ""
    header, old_sections = parse(old_text)
    for name in missing:
        if name not in old_sections:
            raise SystemExit(f"{package}: cannot import {name} to write its API ({missing[name]})")
        sections[name] = old_sections[name]  # keep what an absent optional dependency hides
    # A first snapshot is its own baseline: nothing was released before it.
    released = header.get("released-digest") or digest(body_text(sections))
    text = render(package, package_version(package), released, sections)
    path.write_text(text)
    return "\n".join(
        difflib.unified_diff(
            old_text.splitlines(), text.splitlines(), "before", "after", lineterm=""
        )
    )


def compare(package: str) -> list[str]:
    """The differences between the live API and the snapshot file (empty when equal),
    over the modules that can be imported here."""
    sections, missing = live_sections(package)
    path = snapshot_path(package)
    if not path.exists():
        return [f"{path.relative_to(ROOT)} does not exist"]
    _, recorded = parse(path.read_text())
    problems = []
    for name in sorted(set(sections) | set(recorded)):
        if name not in recorded:
            problems.append(f"new public module {name}")
            continue
        if name in missing:
            continue  # an optional dependency that is not installed here hides it
        if name not in sections:
            problems.append(f"public module {name} is gone")
            continue
        diff = list(
            difflib.unified_diff(
                recorded[name], sections[name], "recorded", "live", lineterm="", n=0
            )
        )
        if diff:
            problems.append(f"[{name}]\n" + "\n".join(diff[2:]))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", help="package folders (default: all)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write packages/<pkg>/api.txt")
    mode.add_argument("--check", action="store_true", help="exit 1 if a snapshot is stale")
    args = parser.parse_args(argv)
    packages = args.packages or workspace_packages()
    unknown = sorted(set(packages) - set(workspace_packages()))
    if unknown:
        parser.error(f"unknown package(s) {unknown}; packages are {workspace_packages()}")
    status = 0
    for package in packages:
        if args.write:
            diff = write(package)
            print(f"{package}: {'unchanged' if not diff else 'written'}")
            if diff:
                print(diff)
        elif args.check:
            problems = compare(package)
            if problems:
                status = 1
                print(f"{package}: the API differs from {SNAPSHOT}:")
                print("\n".join(problems))
        else:
            sections, missing = live_sections(package)
            print(body_text(sections))
            for name, reason in missing.items():
                print(f"[{name}] {reason}")
    return status


if __name__ == "__main__":
    sys.exit(main())
