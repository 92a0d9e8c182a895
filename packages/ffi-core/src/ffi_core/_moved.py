"""Old import paths that forward to the new ones with a DeprecationWarning.

A moved module leaves a shim at its old path: a module whose ``__getattr__``
(:func:`forward`) warns, naming the new place, and returns the object from
there. ``__moved_to__`` on the shim names the new module (the API snapshot
lists the shim's names as moved instead of importing them).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any


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
