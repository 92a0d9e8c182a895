"""Which backend a call uses: per call, per ``call()`` or rule, process-wide, or
the platform's default, in that order."""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

import jax

__all__ = [
    "AUTO",
    "forced_backend",
    "get_backend",
    "invalidate_caches",
    "require_chooser",
    "set_backend",
]

#: The backend name that lets the registered chooser pick, per call signature,
#: the fastest backend registered for the platform (see ``register_chooser``).
AUTO = "auto"

# Set while a kernel's call function or transform rule runs, so that the
# kernel calls they make use the backend of the call being transformed.
_forced: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "xla_custom_kernel_forced_backend", default=None
)
_lock = threading.Lock()
_preferred: str | None = None


def invalidate_caches() -> None:
    # Functions already jitted hold executables lowered for the old choice;
    # JAX keys its caches on the traced program, not on our state, so the only
    # correct way to make a switch take effect on the next call is to drop them.
    jax.clear_caches()


def set_backend(backend: str | None) -> None:
    """Prefer ``backend`` for every kernel, on every platform where it is registered.

    Kernels without that backend (on the platform a call runs on) use their
    platform default. ``"auto"``: every kernel picks its fastest backend per
    call signature, measured once by the registered chooser (see
    ``register_chooser``; kernel-bench's autotuner, found without importing it). ``None`` removes the preference. Takes effect
    on the next call, also of functions already jitted.

    Example:
        >>> import xla_custom_kernel as xck
        >>> xck.set_backend("jax")
        >>> xck.get_backend()
        'jax'
        >>> xck.set_backend(None)
    """
    global _preferred
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"`backend` must be a str or None, got {type(backend)!r}")
    if backend == AUTO:
        require_chooser()
    with _lock:
        changed = backend != _preferred
        _preferred = backend
    if changed:
        invalidate_caches()


def get_backend() -> str | None:
    """The process-wide backend preference set by :func:`set_backend`, or None."""
    return _preferred


def current_forced() -> str | None:
    return _forced.get()


@contextlib.contextmanager
def forced_backend(backend: str | None) -> Iterator[None]:
    token = _forced.set(backend)
    try:
        yield
    finally:
        _forced.reset(token)


def require_chooser() -> Any:
    """The chooser of backend ``"auto"`` (see ``_chooser``), or the ImportError
    saying how to install one."""
    # Imported here: _chooser loads entry points, which need not happen before
    # "auto" is asked for.
    from ._chooser import get_chooser

    return get_chooser()
