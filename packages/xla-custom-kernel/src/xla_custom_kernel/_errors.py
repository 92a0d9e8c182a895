"""Exceptions of xla-custom-kernel; each subclasses the builtin a user would catch."""

from __future__ import annotations

__all__ = [
    "BackendError",
    "DuplicateKernelError",
    "NoKernelError",
    "UnknownBackendError",
]


class DuplicateKernelError(ValueError):
    """Two kernels were created with one name."""


class NoKernelError(RuntimeError):
    """No backend is registered for the platform a call is lowered for."""


class UnknownBackendError(ValueError):
    """A backend name that is not registered (for the platform in question)."""


class BackendError(RuntimeError):
    """A backend's kernel generator or kernel failed; the message names the
    backend, the alternatives and the call that switches to one."""
