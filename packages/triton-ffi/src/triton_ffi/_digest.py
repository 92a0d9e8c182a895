"""The digest of a ``@triton.jit`` kernel: what its compiled code depends on."""

from __future__ import annotations

import hashlib
from typing import Any

__all__ = ["kernel_digest"]


def kernel_digest(kernel: Any, label: str) -> str:
    """A digest of everything the compiled kernel depends on.

    Triton's own ``JITFunction.cache_key`` (pure Python, no GPU needed) covers
    the source, its line, the ``@triton.jit`` functions it calls (their keys,
    recursively) and the ``tl.constexpr`` globals they read. Added here: every
    global or closure value Triton recorded (``tl`` dtypes and named tuples are
    allowed as globals but are not in its key), and the parameters' defaults
    (a constexpr left out takes its default, which its key does not hold).
    """
    try:
        key = kernel.cache_key
    except Exception as exc:  # Triton refuses what it cannot compile either
        raise TypeError(
            f"{label}: Triton cannot tell what the kernel depends on: {type(exc).__name__}: {exc}"
        ) from exc
    h = hashlib.sha256(key.encode())
    missing = object()
    for (gname, _), (value, scope) in kernel.used_global_vals.items():
        now = scope.get(gname, missing)
        if now is not value and _differs(now, value):
            shown = "removed" if now is missing else f"now {now!r}"
            raise RuntimeError(
                f"{label}: global {gname!r} was {value!r} when Triton first read the kernel "
                f"and is {shown}; Triton compiles a kernel against the values it read "
                "first: define the kernel again (run its @triton.jit definition) after "
                "changing the global"
            )
        h.update(f"global:{gname}={type(value).__qualname__}:{value!r}".encode())
    for param in kernel.params:
        if param.has_default:
            h.update(f"default:{param.name}={param.default!r}".encode())
    return h.hexdigest()[:24]


def _differs(now: Any, then: Any) -> bool:
    try:
        return bool(now != then)
    except Exception:  # values that do not compare to a bool: Triton's own check decides
        return False
