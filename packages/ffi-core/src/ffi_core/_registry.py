"""Content-addressed FFI target names and a thread-safe registry.

Target names derive from content (a kernel's code and its dtype/rank
signature), never from counters or ``id()``, so they are the same in every
process and ``jax.export`` and the persistent compilation cache keep working.
Every registered handler is pinned here for the life of the process: XLA keeps
a raw pointer to it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import threading
from collections.abc import Callable
from typing import Any

import jax

from .abi import HandlerTraits

__all__ = [
    "TARGET_PLATFORMS",
    "XLA_PLATFORM_NAMES",
    "TargetConflictError",
    "handler_address",
    "register_target",
    "registered_targets",
    "target_name",
]

#: Platforms a target may be registered for, as JAX's lowering names them.
TARGET_PLATFORMS = ("cpu", "cuda", "rocm")

#: The name XLA's registry keys each platform by. JAX maps only "cpu" and "gpu"
#: itself; the GPU plugins take registrations under "CUDA" and "ROCM", and a
#: target registered under "cuda" waits forever for a plugin of that name
#: ("No FFI handler registered ... on a platform CUDA" at the first call).
XLA_PLATFORM_NAMES = {"cpu": "cpu", "cuda": "CUDA", "rocm": "ROCM"}

# A private prototype of PyCapsule_New. Setting argtypes/restype on
# ctypes.pythonapi.PyCapsule_New would change one object that every library in
# the process shares: a neighbour that gives it another prototype (brainevent
# does) made our calls fail, or crash the process, and ours would break theirs.
_capsule_new = ctypes.PYFUNCTYPE(
    ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p
)(("PyCapsule_New", ctypes.pythonapi))


class TargetConflictError(ValueError):
    """A target name registered again with different content."""


@dataclasses.dataclass(frozen=True)
class _Entry:
    content: str
    address: int
    pinned: tuple[Any, ...]


_lock = threading.Lock()
_targets: dict[tuple[str, str], _Entry] = {}


def target_name(prefix: str, *content: object) -> str:
    """A stable FFI target name: ``prefix`` and a digest of ``content``.

    ``content`` is rendered with ``repr``; pass only values whose ``repr`` is
    stable across processes (strings, numbers, tuples of them).

    Example:
        >>> target_name("numba_cpu.add", "float32[1]", "float32[1]")
        'numba_cpu.add_bf43f2fe00df8d8d7ad3'
    """
    if not isinstance(prefix, str):
        raise TypeError(f"`prefix` must be a non-empty str, got {type(prefix)!r}")
    if not prefix:
        raise ValueError(f"`prefix` must be a non-empty str, got {prefix!r}")
    digest = hashlib.sha256(repr(content).encode()).hexdigest()[:20]
    return f"{prefix}_{digest}"


def handler_address(handler: object) -> int:
    """The address of a native handler: an int, a ctypes function pointer, or
    anything with an ``address`` attribute (a Numba ``cfunc``)."""
    if isinstance(handler, int) and not isinstance(handler, bool):
        address = handler
    elif isinstance(handler, ctypes._CFuncPtr):  # type: ignore[attr-defined]
        address = ctypes.cast(handler, ctypes.c_void_p).value or 0
    elif isinstance(getattr(handler, "address", None), int):
        address = handler.address  # type: ignore[attr-defined]
    else:
        raise TypeError(
            "`handler` must be an int address, a ctypes function pointer or an object with an "
            f"int `address` (a numba cfunc), got {type(handler)!r}"
        )
    if address <= 0:
        raise ValueError(f"`handler` must point somewhere, got address {address}")
    return address


def register_target(
    name: str,
    handler: object,
    *,
    content: str,
    platform: str = "cpu",
    traits: HandlerTraits = HandlerTraits.NONE,
    pin: tuple[Any, ...] = (),
    register: Callable[..., None] | None = None,
) -> bool:
    """Register ``handler`` as the FFI target ``name`` on ``platform``, once.

    ``platform`` is JAX's name (``"cpu"``, ``"cuda"``, ``"rocm"``); the
    handler is registered with XLA under the name XLA's platform takes
    (``XLA_PLATFORM_NAMES``). Registering the same name with the same ``content`` again does nothing and
    returns False; with different content it raises :class:`TargetConflictError`
    (XLA would otherwise keep whichever handler came first). ``handler`` and
    every object in ``pin`` are kept alive for the life of the process.

    Returns:
        True when this call registered the target.
    """
    if platform not in TARGET_PLATFORMS:
        raise ValueError(f"`platform` must be one of {TARGET_PLATFORMS}, got {platform!r}")
    address = handler_address(handler)
    key = (name, platform)
    with _lock:
        entry = _targets.get(key)
        if entry is not None:
            if entry.content != content:
                raise TargetConflictError(
                    f"FFI target {name!r} on {platform!r} is already registered with different "
                    "content; target names must be derived from content (use "
                    "ffi_core.bridge.target_name) so that one name never means two handlers"
                )
            return False
        capsule = _capsule_new(address, b"xla._CUSTOM_CALL_TARGET", None)
        kwargs: dict[str, Any] = {}
        if traits & HandlerTraits.COMMAND_BUFFER_COMPATIBLE:
            from jaxlib import xla_client

            kwargs["traits"] = xla_client.CustomCallTargetTraits.COMMAND_BUFFER_COMPATIBLE
        (register or jax.ffi.register_ffi_target)(
            name, capsule, platform=XLA_PLATFORM_NAMES[platform], api_version=1, **kwargs
        )
        _targets[key] = _Entry(content, address, (handler, capsule, *pin))
        return True


def registered_targets() -> dict[tuple[str, str], str]:
    """``{(name, platform): content}`` of every target registered so far."""
    with _lock:
        return {key: entry.content for key, entry in _targets.items()}
