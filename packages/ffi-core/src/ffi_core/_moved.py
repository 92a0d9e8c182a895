"""Names and modules that moved, kept working at their old place for one
release, each access warning with a DeprecationWarning naming the new place.

- :func:`moved_getattr`: a module ``__getattr__`` made from a table of old
  name -> the module that holds it now (the module keeps the table as
  ``_MOVED``; tools/api_snapshot.py lists those names, marked deprecated).
- :func:`renamed_message`: the warning of a name that has a new name (a
  module keeps those as ``_RENAMED``: old name -> (module, new name), served by
  :func:`moved_getattr` too and listed by tools/api_snapshot.py).
- :func:`moved_module`: what a shim left at a moved module's old path
  defines, from :data:`MOVED_MODULES` (old path -> the new module and the
  names added to it since the move) and the new module's ``_RENAMED`` table
  (the names renamed since): ``__moved_to__``
  (the new module), ``_NAMES`` (old name -> new name), ``__all__``, and a
  ``__getattr__`` (made by :func:`forward`) and ``__dir__`` serving those names.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: The modules that moved: old path -> (the new module, the names added to
#: it since). The old path forwards every other name of the new module's
#: ``__all__``, the names it had, and each name the new module renamed since
#: (its ``_RENAMED`` table) under its old name.
MOVED_MODULES: dict[str, tuple[str, frozenset[str]]] = {
    "ffi_core.cpu": ("ffi_core.bridge.cpu", frozenset({"cpu_call_bind"})),
    "ffi_core.cuda": (
        "ffi_core.bridge.cuda",
        frozenset(
            {
                "MAX_BLOCK",
                "MAX_GRID",
                "MAX_SHARED_MEM",
                "MAX_THREADS_PER_BLOCK",
                "STATIC_SHARED_MEM",
                "cuda_launch_bind",
                "cuda_launch_cpu_lowering",
                "cuda_launch_lowering",
            }
        ),
    ),
    "ffi_core.cuda.testing": ("ffi_core.bridge.cuda.testing", frozenset()),
}


def moved_message(module: str, name: str, new_module: str) -> str:
    """The warning an old name gives.

    >>> moved_message("ffi_core", "target_name", "ffi_core.bridge")
    '`ffi_core.target_name` has moved: import it from `ffi_core.bridge` (`from ffi_core.bridge import target_name`); the old name will be removed in the next minor release'
    """
    return (
        f"`{module}.{name}` has moved: import it from `{new_module}` "
        f"(`from {new_module} import {name}`); the old name will be removed in the next "
        "minor release"
    )


def renamed_message(module: str, name: str, new_module: str, new_name: str) -> str:
    """The warning a renamed name gives.

    >>> renamed_message("ffi_core.bridge", "PLATFORMS", "ffi_core.bridge", "TARGET_PLATFORMS")
    '`ffi_core.bridge.PLATFORMS` is now `ffi_core.bridge.TARGET_PLATFORMS` (`from ffi_core.bridge import TARGET_PLATFORMS`); the old name will be removed in the next minor release'
    """
    return (
        f"`{module}.{name}` is now `{new_module}.{new_name}` "
        f"(`from {new_module} import {new_name}`); the old name will be removed in the next "
        "minor release"
    )


def moved_getattr(
    module: str,
    table: Mapping[str, str],
    renamed: Mapping[str, tuple[str, str]] | None = None,
) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving the names of ``table`` (old name -> the
    module that holds it now) and of ``renamed`` (old name -> the module and the
    name it has now) with a DeprecationWarning."""
    renamed = dict(renamed or {})

    def __getattr__(name: str) -> Any:
        if name in renamed:
            renamed_module, new_name = renamed[name]
            warnings.warn(
                renamed_message(module, name, renamed_module, new_name),
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(renamed_module), new_name)
        new_module = table.get(name)
        if new_module is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(moved_message(module, name, new_module), DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new_module), name)

    return __getattr__


def forward(old: str, new: str, names: Iterable[str] | Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the shim at ``old``: each of ``names`` (or
    each key of a mapping of old name to new name) warns and comes from
    ``new``; any other name raises AttributeError."""
    renamed = dict(names) if isinstance(names, Mapping) else {name: name for name in names}

    def __getattr__(name: str) -> Any:
        if name not in renamed:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        target = renamed[name]
        warnings.warn(
            f"{old}.{name} moved to {new}.{target}; import it from there "
            f"({old} goes away in the next minor release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new), target)

    return __getattr__


def moved_module(
    old: str,
) -> tuple[str, dict[str, str], list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """What the shim at ``old`` (a key of ``MOVED_MODULES``) defines:
    ``__moved_to__, _NAMES, __all__, __getattr__, __dir__``.

    Example:
        >>> new, names, all_, getattr_, dir_ = moved_module("ffi_core.cpu")
        >>> new, names["cpu_call"], "cpu_call" in all_
        ('ffi_core.bridge.cpu', 'cpu_call', True)
    """
    new, added = MOVED_MODULES[old]
    module = importlib.import_module(new)
    renames = {name: to for name, (_, to) in getattr(module, "_RENAMED", {}).items()}
    kept = {*added, *renames.values()}
    renamed = {name: name for name in module.__all__ if name not in kept}
    renamed.update(renames)

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[old]), *renamed})

    return new, renamed, sorted(renamed), forward(old, new, renamed), __dir__
