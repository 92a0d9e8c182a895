"""The kernels a bridge has wrapped in this process, found again by the digest
a recipe step names when an exported function is deserialized."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ._recipe import MissingKernelError

__all__ = ["KernelCatalog"]


class KernelCatalog:
    """The kernels a bridge has wrapped in this process, by the digest of their
    code, so that its rebuilder finds the kernel a recipe step names.

    Args:
        language: how messages name the kernels (``"numba kernel"``).
        wrapper: the bridge's wrapping function (``"numba_kernel"``).
        passed: what the user passes in ``deserialize``'s ``kernels``
            (``"the @numba.njit function"``).
        captured: what a kernel does with the values its digest covers
            (``"captures"``, ``"reads"``).

    Example:
        >>> import types
        >>> catalog = KernelCatalog("toy kernel", "toy_kernel", "the function")
        >>> info = types.SimpleNamespace(digest="ab12", qualname="add")
        >>> catalog.remember(info) is info
        True
        >>> catalog.find({"digest": "ab12", "kernel": "add"}) is info
        True
    """

    def __init__(self, language: str, wrapper: str, passed: str, captured: str = "captures"):
        self._language = language
        self._wrapper = wrapper
        self._passed = passed
        self._captured = captured
        self._lock = threading.Lock()
        self._known: dict[str, Any] = {}

    def remember(self, info: Any) -> Any:
        """Keep ``info`` (with ``digest`` and ``qualname``) unless one with its
        digest is known; returns the one kept."""
        with self._lock:
            return self._known.setdefault(info.digest, info)

    def find(self, step: Mapping[str, Any]) -> Any:
        """The kernel a recipe step names by ``digest`` (and ``kernel``, its
        name), or a :class:`MissingKernelError` saying what to import."""
        with self._lock:
            info = self._known.get(step["digest"])
            same_name = any(i.qualname == step["kernel"] for i in self._known.values())
        if info is not None:
            return info
        if same_name:
            raise MissingKernelError(
                f"{self._language} {step['kernel']!r} is known here, but its code or the values "
                f"it {self._captured} differ from the exported kernel's; import the version that "
                "was exported"
            )
        raise MissingKernelError(
            f"{self._language} {step['kernel']!r} is not known here: import the module that "
            f"wraps it with {self._wrapper}, or pass {self._passed} in `kernels`"
        )
