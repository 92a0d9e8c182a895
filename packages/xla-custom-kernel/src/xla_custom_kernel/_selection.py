"""Which backend a call uses: per call, per ``call()`` or rule, process-wide, or
the platform's default, in that order."""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import overload

import jax

from ._chooser import find_chooser
from ._platforms import BACKEND_PLATFORMS, check_platform

__all__ = [
    "AUTO",
    "clear_backends",
    "forced_backend",
    "get_backend",
    "invalidate_caches",
    "platform_preference",
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
_per_platform: dict[str, str] = {}


def invalidate_caches() -> None:
    # Functions already jitted hold executables lowered for the old choice;
    # JAX keys its caches on the traced program, not on our state, so the only
    # correct way to make a switch take effect on the next call is to drop them.
    jax.clear_caches()


@overload
def set_backend(backend: str | None, /) -> None: ...


@overload
def set_backend(platform: str, backend: str | None, /) -> None: ...


def set_backend(*args: str | None) -> None:
    """Prefer a backend process-wide: ``set_backend(backend)`` for every
    kernel on every platform, ``set_backend(platform, backend)`` (the seed's
    form) on one platform.

    ``set_backend(backend)``: kernels without that backend installed and
    registered (on the platform a call runs on) use their platform default,
    silently: a preference for all kernels is expected to miss many.
    ``"auto"``: every kernel picks its fastest backend per call signature,
    measured once by the registered chooser (see ``register_chooser``;
    kernel-bench's autotuner, found without importing it).

    ``set_backend(platform, backend)``: on ``platform`` this preference comes
    before the one for every platform. A kernel that lacks ``backend`` there
    (not registered, or its bridge package not installed) warns once with a
    :class:`BackendPreferenceWarning` naming the kernel and the reason, and
    uses its default, as the seed does.

    ``None`` removes the preference (of every platform, or of ``platform``);
    :func:`clear_backends` removes all. Takes effect on the next call, also of
    functions already jitted.

    Example:
        >>> import xla_custom_kernel as xck
        >>> xck.set_backend("jax")
        >>> xck.get_backend()
        'jax'
        >>> xck.set_backend("gpu", "warp")
        >>> xck.get_backend("gpu"), xck.get_backend("cpu")
        ('warp', 'jax')
        >>> xck.clear_backends()
    """
    global _preferred
    if len(args) == 1:
        platform, backend = None, args[0]
    elif len(args) == 2:
        platform = check_platform(args[0])
        backend = args[1]
    else:
        raise TypeError(
            f"set_backend takes (backend) or (platform, backend), got {len(args)} arguments"
        )
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"`backend` must be a str or None, got {type(backend)!r}")
    if backend == "":
        raise ValueError("`backend` must be a backend's name or None, got ''")
    if platform is None and backend in BACKEND_PLATFORMS:
        raise ValueError(
            f"`backend` {backend!r} is a platform name; set a platform's backend with "
            f"set_backend({backend!r}, backend)"
        )
    if backend == AUTO:
        find_chooser()
    with _lock:
        if platform is None:
            changed = backend != _preferred
            _preferred = backend
        else:
            changed = backend != _per_platform.get(platform)
            if backend is None:
                _per_platform.pop(platform, None)
            else:
                _per_platform[platform] = backend
    if changed:
        invalidate_caches()


def get_backend(platform: str | None = None) -> str | None:
    """The process-wide backend preference set by :func:`set_backend`, or None;
    with ``platform``, the one that applies there (set for that platform, else
    for every platform)."""
    if platform is None:
        return _preferred
    check_platform(platform)
    return _per_platform.get(platform, _preferred)


def platform_preference(platform: str) -> str | None:
    """The preference set with ``set_backend(platform, backend)``, or None."""
    return _per_platform.get(platform)


def clear_backends() -> None:
    """Remove every backend preference set with :func:`set_backend` (of every
    platform and of each), as the seed's ``clear_backends``."""
    global _preferred
    with _lock:
        changed = _preferred is not None or bool(_per_platform)
        _preferred = None
        _per_platform.clear()
    if changed:
        invalidate_caches()


def current_forced() -> str | None:
    return _forced.get()


@contextlib.contextmanager
def forced_backend(backend: str | None) -> Iterator[None]:
    token = _forced.set(backend)
    try:
        yield
    finally:
        _forced.reset(token)
