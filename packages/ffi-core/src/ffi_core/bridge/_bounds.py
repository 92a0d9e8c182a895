"""Bounds checking on request: one switch that every CPU bridge reads.

A kernel that indexes past its buffers writes over the process's heap, and
the first symptom comes later and far away (``malloc(): invalid size``). A
bridge can compile its kernel with bounds checks (an index out of range then
raises ``IndexError`` inside the kernel, which reaches the caller as an
exception naming the kernel) at a cost in speed. It does so when its own
option asks for it, or while :func:`bounds_checking` is in effect around
the calls it binds (``check_kernel`` runs every check so), or for a whole
process when ``$FFI_CORE_BOUNDSCHECK`` is ``1`` (read once, at the first
bind that asks).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
from collections.abc import Iterator

__all__ = ["BOUNDSCHECK_ENV", "bounds_checked", "bounds_checking"]

#: The environment variable that turns bounds checks on for a whole process.
BOUNDSCHECK_ENV = "FFI_CORE_BOUNDSCHECK"

_checking: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "ffi_core_bounds_checking", default=False
)


@functools.cache
def _from_environment() -> bool:
    value = os.environ.get(BOUNDSCHECK_ENV, "")
    if value not in ("", "0", "1"):
        raise ValueError(f"${BOUNDSCHECK_ENV} must be '0' or '1' (or unset), got {value!r}")
    return value == "1"


def bounds_checked(requested: bool | None = None, *, in_blocks: bool = True) -> bool:
    """Whether a kernel bound now is compiled with bounds checks: the
    bridge's option ``requested`` when given (True or False), else while
    :func:`bounds_checking` is in effect (unless ``in_blocks`` is False: a
    bridge whose checks cost too much to make on every call ``check_kernel``
    makes), else ``$FFI_CORE_BOUNDSCHECK``.

    Raises:
        ValueError: ``$FFI_CORE_BOUNDSCHECK`` is set to something other than
            ``0`` or ``1``.
    """
    if requested is not None:
        return requested
    return (in_blocks and _checking.get()) or _from_environment()


@contextlib.contextmanager
def bounds_checking(enabled: bool = True) -> Iterator[None]:
    """Within the block (in this thread or task), kernels bound with no
    option of their own are compiled with bounds checks (``enabled``) or
    without.

    Example:
        >>> with bounds_checking():
        ...     bounds_checked()
        True
    """
    token = _checking.set(bool(enabled))
    try:
        yield
    finally:
        _checking.reset(token)
