"""Every XLACustomKernel created in the process, by name, and the module that
created it.

A name identifies a kernel (in exported programs and ``get_kernel``), so it
stays unique: creating a kernel with a name that exists replaces the older
kernel, with a warning, where the same module creates it again (a reload, a
retried import), and is an error where another module does.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterable
from typing import Any

from ._errors import DuplicateKernelError, KernelReplacedWarning

__all__ = [
    "get_all_primitive_names",
    "get_kernel",
    "get_primitives_by_tags",
    "get_registry",
    "register_kernel",
    "registered_kernels",
]

_lock = threading.Lock()
_kernels: dict[str, Any] = {}


def register_kernel(kernel: Any, module: str) -> None:
    """Add ``kernel``, created in ``module``; see the module docs for a name
    that exists."""
    with _lock:
        old = _kernels.get(kernel.name)
        if old is not None and old.module != module:
            raise DuplicateKernelError(
                f"a kernel named {kernel.name!r} already exists, created in module "
                f"{old.module!r}; module {module!r} cannot create another: kernel names "
                "identify primitives and must be unique in a process. Choose another name, "
                "for example prefixed with your package's name "
                f"({_prefixed(module, kernel.name)!r}), or use "
                f"xla_custom_kernel.get_kernel({kernel.name!r}) to reach the existing one"
            )
        _kernels[kernel.name] = kernel
    if old is not None:
        old._replace_with(kernel)
        warnings.warn(
            f"a kernel named {kernel.name!r} is already registered by module {module!r}; "
            "the new one replaces it (the module was reloaded or imported again). The old "
            "kernel object, and functions traced with it, raise ReplacedKernelError from now "
            "on: use the new one",
            KernelReplacedWarning,
            stacklevel=3,
        )


def _prefixed(module: str, name: str) -> str:
    package = module.split(".")[0].strip("_<>") or "mypackage"
    return f"{package}_{name}"


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
    wanted = _tag_set(tags)
    return {n: k for n, k in kernels.items() if wanted & set(k.tags)}


def _tag_set(tags: str | Iterable[str]) -> set[str]:
    if isinstance(tags, str):
        return {tags}
    found = set(tags)
    for t in found:
        if not isinstance(t, str):
            raise TypeError(f"`tags` must be a str or an iterable of str, got a {type(t)!r} in it")
    return found


def get_kernel(name: str) -> Any:
    """The kernel created with ``name``; KeyError listing the known names otherwise."""
    with _lock:
        try:
            return _kernels[name]
        except KeyError:
            known = ", ".join(map(repr, _kernels)) or "none"
            raise KeyError(f"no kernel named {name!r}; known kernels: {known}") from None


def get_registry() -> dict[str, Any]:
    """A copy of ``{name: kernel}`` for every kernel in the process, as the
    seed API's registry function returns it (same as :func:`registered_kernels`)."""
    return registered_kernels()


def get_primitives_by_tags(tags: str | Iterable[str]) -> dict[str, Any]:
    """The kernels that have *all* of ``tags`` (a set of str; a str is one
    tag), by name, as the seed API's registry function selects them
    (:func:`registered_kernels` keeps those with any of them).

    Example:
        >>> import xla_custom_kernel as xck
        >>> k = xck.XLACustomKernel("doc_tags_example")
        >>> k.def_tags("csr", "binary")
        >>> list(xck.get_primitives_by_tags({"csr", "binary"}).values()) == [k]
        True
        >>> "doc_tags_example" in xck.get_primitives_by_tags({"csr", "dense"})
        False
    """
    wanted = _tag_set(tags)
    return {n: k for n, k in registered_kernels().items() if wanted <= set(k.tags)}


def get_all_primitive_names() -> list[str]:
    """The names of every kernel in the process, sorted, as the seed API's
    registry function lists them."""
    return sorted(registered_kernels())
