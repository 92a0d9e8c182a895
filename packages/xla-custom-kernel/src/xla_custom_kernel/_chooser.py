"""Who picks the backend of a call whose backend is ``"auto"``: the chooser protocol.

This package does not measure backends; a *chooser* does, registered with
:func:`register_chooser`. kernel-bench registers its autotuner when it is
imported, and declares it under the entry point group
:data:`CHOOSER_ENTRY_POINTS` as well, so that ``"auto"`` works without the
user importing kernel-bench: where no chooser is registered when one is
needed, the entry points of that group are loaded (installed packages only:
what a chooser is comes from package metadata, never from data). Nothing here
names a package that provides one.
"""

from __future__ import annotations

import importlib.metadata
import threading
from typing import Any, Protocol, runtime_checkable

from ffi_core.bridge import install_hint

from ._call_site import CallSite

__all__ = [
    "CHOOSER_ENTRY_POINTS",
    "Chooser",
    "find_chooser",
    "register_chooser",
    "registered_chooser",
]

#: The entry point group a package declares its chooser under (in its
#: ``pyproject.toml``: ``[project.entry-points."xla_custom_kernel.choosers"]``);
#: each entry names a :class:`Chooser` object.
CHOOSER_ENTRY_POINTS = "xla_custom_kernel.choosers"

#: What :func:`find_chooser` says where no chooser is installed.
NO_CHOOSER = (
    "backend 'auto' needs a chooser that measures the registered backends, and none is "
    f"registered; kernel-bench provides one: {install_hint('xla-custom-kernel[bench]')}, "
    "or pick a backend by name"
)


@runtime_checkable
class Chooser(Protocol):
    """What picks the backend of ``"auto"`` calls, and serves
    ``XLACustomKernel.explain`` and ``XLACustomKernel.benchmark``.

    Every method gets what it needs from this package: a :class:`CallSite`
    (with :meth:`CallSite.runner` to run the operation with a named backend),
    or the kernel itself.
    """

    def choose(self, site: CallSite) -> str:
        """The backend ``site`` uses: one of ``site.backends``. Called when XLA
        lowers a call whose backend is ``"auto"``; it should answer from memory
        when asked again in the same process."""
        ...

    def explain(self, site: CallSite) -> Any:
        """The decision :meth:`choose` makes for ``site``, as an object whose
        ``describe()`` returns it in words (``XLACustomKernel.explain`` prints
        that and returns the object)."""
        ...

    def benchmark(self, kernel: Any, **kwargs: Any) -> Any:
        """Time every backend of ``kernel`` (``XLACustomKernel.benchmark``)."""
        ...


_lock = threading.RLock()
_chooser: Chooser | None = None


def register_chooser(chooser: Chooser | None, *, replace: bool = False) -> None:
    """Make ``chooser`` the one that picks backends for ``"auto"`` (None:
    forget the one registered). Registering the same object again does
    nothing; another one replaces it only with ``replace=True``. Functions
    already jitted keep the backends they were lowered with.

    Example:
        >>> import xla_custom_kernel as xck
        >>> class First:
        ...     def choose(self, site):
        ...         return site.backends[0]
        ...     def explain(self, site):
        ...         return site.backends[0]
        ...     def benchmark(self, kernel, **kwargs):
        ...         raise NotImplementedError
        >>> before = xck.registered_chooser()
        >>> xck.register_chooser(First(), replace=True)
        >>> isinstance(xck.registered_chooser(), First)
        True
        >>> xck.register_chooser(before, replace=True)

    Raises:
        TypeError: ``chooser`` lacks ``choose``, ``explain`` or ``benchmark``.
        ValueError: another chooser is registered and ``replace`` is False.
    """
    global _chooser
    if chooser is not None and not isinstance(chooser, Chooser):
        raise TypeError(
            "`chooser` must have the methods choose(site), explain(site) and "
            f"benchmark(kernel, **kwargs) of xla_custom_kernel.Chooser, or be None, got "
            f"{type(chooser)!r}"
        )
    with _lock:
        if chooser is not None and _chooser is not None and _chooser is not chooser:
            if not replace:
                raise ValueError(
                    f"a chooser is already registered ({type(_chooser).__qualname__}); pass "
                    "replace=True to replace it"
                )
        _chooser = chooser


def registered_chooser() -> Chooser | None:
    """The chooser registered, or None: entry points are not loaded here
    (:func:`find_chooser` loads them where none is registered)."""
    return _chooser


def _from_entry_points() -> tuple[Chooser | None, BaseException | None]:
    # Installed packages' declarations of the group, by group name only. The
    # first that loads and is a Chooser wins; a failure is kept for the message.
    problem: BaseException | None = None
    for entry in sorted(
        importlib.metadata.entry_points(group=CHOOSER_ENTRY_POINTS), key=lambda e: e.name
    ):
        try:
            found = entry.load()
        except ImportError as exc:
            problem = problem or exc
            continue
        if isinstance(found, Chooser):
            return found, None
        problem = problem or TypeError(
            f"entry point {entry.name!r} of group {CHOOSER_ENTRY_POINTS!r} names "
            f"{type(found)!r}, not a chooser"
        )
    return None, problem


def find_chooser() -> Chooser:
    """The registered chooser; where there is none, the first one an installed
    package declares under :data:`CHOOSER_ENTRY_POINTS`, registered
    (:func:`registered_chooser` only looks, and may answer None).

    Raises:
        ImportError: no chooser is registered or installed; the message says
            how to install kernel-bench's.
    """
    global _chooser
    with _lock:
        if _chooser is not None:
            return _chooser
    # Loaded without holding the lock: loading imports the provider, which may
    # register itself (kernel-bench does) from another thread's import too.
    found, problem = _from_entry_points()
    if found is None:
        raise ImportError(NO_CHOOSER) from problem
    with _lock:
        # A chooser registered meanwhile (by the import above, say) stays.
        if _chooser is None:
            _chooser = found
        return _chooser
