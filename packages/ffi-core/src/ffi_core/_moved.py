"""Names that moved to another module and keep working at the old one for a
release: a module's ``__getattr__`` made from a table of old name -> new module.

The old name resolves to the very object at the new place, and each access
warns with a DeprecationWarning naming where to import it from. The table is
kept on the module as ``_MOVED`` (tools/api_snapshot.py lists those names,
marked deprecated, in the API snapshot).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


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


def moved_getattr(module: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving the names of ``table`` (old name -> the
    module that holds it now) with a DeprecationWarning."""

    def __getattr__(name: str) -> Any:
        new_module = table.get(name)
        if new_module is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(moved_message(module, name, new_module), DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new_module), name)

    return __getattr__
