"""Platform names as users write them, and as JAX lowers for them."""

from __future__ import annotations

from typing import Any

__all__ = ["BACKEND_PLATFORMS", "LOWERING_PLATFORMS", "check_platform", "platform_of_backend"]

#: JAX backend names (``jax.default_backend()``) a kernel can be registered for.
BACKEND_PLATFORMS = ("cpu", "gpu", "tpu")

#: JAX's lowering platform -> ours. NVIDIA and AMD GPUs are both "gpu".
LOWERING_PLATFORMS = {"cpu": "cpu", "cuda": "gpu", "rocm": "gpu", "tpu": "tpu"}


def check_platform(value: Any, what: str = "`platform`") -> str:
    if not isinstance(value, str):
        raise TypeError(
            f"{what} must be a str, one of {', '.join(map(repr, BACKEND_PLATFORMS))}, got {type(value)!r}"
        )
    if value not in BACKEND_PLATFORMS:
        raise ValueError(
            f"{what} must be one of {', '.join(map(repr, BACKEND_PLATFORMS))}, got {value!r}"
        )
    return value


def platform_of_backend(jax_backend: str) -> str:
    """Our platform name for a JAX backend name (``jax.default_backend()``)."""
    return LOWERING_PLATFORMS.get(jax_backend, jax_backend)
