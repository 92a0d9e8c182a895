"""Exceptions and warnings of xla-custom-kernel; each subclasses the builtin a user would catch."""

from __future__ import annotations

__all__ = [
    "BackendError",
    "BackendPreferenceWarning",
    "DuplicateKernelError",
    "KernelReplacedWarning",
    "NoKernelError",
    "ReplacedKernelError",
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


class ReplacedKernelError(RuntimeError):
    """A kernel was used after a newer kernel of its name replaced it (its
    module was reloaded or imported again)."""


class KernelReplacedWarning(UserWarning):
    """A kernel was created with the name of one its own module created before
    (a reload or a repeated import); the new one replaces it."""


class BackendPreferenceWarning(UserWarning):
    """A kernel lacks the backend preferred for a platform with
    ``set_backend(platform, backend)`` and uses its default instead."""
