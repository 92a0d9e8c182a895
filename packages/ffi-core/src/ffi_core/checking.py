"""Deprecated: ``check_kernel`` and its comparison helpers are the kernel-check
package's (``import kernel_check``). Each name here forwards there with a
DeprecationWarning, for one release; without kernel-check installed it is an
ImportError saying how to install it. ffi-core does not depend on kernel-check:
it is imported only when one of these names is asked for.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from ._install import install_hint

#: The names that moved, each to ``kernel_check`` (old name -> its module now).
_MOVED = dict.fromkeys(
    (
        "CHECKS",
        "TOLERANCES",
        "CheckReport",
        "CheckResult",
        "Status",
        "check_kernel",
        "first_difference",
        "max_difference",
        "tolerance",
    ),
    "kernel_check",
)


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"`ffi_core.checking.{name}` is deprecated and will be removed in the next release: "
        f"import it from `kernel_check` (the kernel-check package): "
        f"`from kernel_check import {name}`",
        DeprecationWarning,
        stacklevel=2,
    )
    try:
        module = importlib.import_module("kernel_check")
    except ImportError as exc:
        raise ImportError(
            f"`ffi_core.checking.{name}` moved to the kernel-check package, which is not "
            f"installed: {install_hint('kernel-check')}, then "
            f"`from kernel_check import {name}`"
        ) from exc
    return getattr(module, name)


def __dir__() -> list[str]:
    return sorted(_MOVED)
