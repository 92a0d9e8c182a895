"""Every XLACustomKernel created in the process, by name."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from ._errors import DuplicateKernelError

__all__ = ["get_kernel", "register_kernel", "registered_kernels"]

_lock = threading.Lock()
_kernels: dict[str, Any] = {}


def register_kernel(kernel: Any) -> None:
    with _lock:
        if kernel.name in _kernels:
            raise DuplicateKernelError(
                f"a kernel named {kernel.name!r} already exists; kernel names identify "
                "primitives and must be unique in a process (choose another name, or use "
                f"xla_custom_kernel.get_kernel({kernel.name!r}) to reach the existing one)"
            )
        _kernels[kernel.name] = kernel


def registered_kernels(tags: str | Iterable[str] | None = None) -> dict[str, Any]:
    """All kernels created in this process, by name, in creation order.

    Args:
        tags: keep only kernels with at least one of these tags (a str is one tag).

    Example:
        >>> import xla_custom_kernel as xck
        >>> k = xck.XLACustomKernel("doc_registry_example")
        >>> k.def_tags("example")
        >>> "doc_registry_example" in xck.registered_kernels(tags="example")
        True
    """
    with _lock:
        kernels = dict(_kernels)
    if tags is None:
        return kernels
    wanted = {tags} if isinstance(tags, str) else set(tags)
    return {n: k for n, k in kernels.items() if wanted & set(k.tags)}


def get_kernel(name: str) -> Any:
    """The kernel created with ``name``; KeyError listing the known names otherwise."""
    with _lock:
        try:
            return _kernels[name]
        except KeyError:
            known = ", ".join(map(repr, _kernels)) or "none"
            raise KeyError(f"no kernel named {name!r}; known kernels: {known}") from None
