"""What every example module builds on: kernels whose FFI target names stay put,
and benchmark cases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from .._config import BenchmarkConfig

__all__ = ["config", "stable_ffi_name"]

F = TypeVar("F", bound=Callable[..., Any])

# The module all examples were defined in before they were split up.
_PUBLIC_MODULE = "kernel_bench.examples"


def stable_ffi_name(fn: F) -> F:
    # FFI target names (and the handlers Numba caches on disk) digest the
    # kernel's module and qualified name (ffi_core.function_digest). Naming the
    # public module, not the private one a kernel happens to live in, keeps the
    # names they had before the split, so programs saved with jax.export and
    # cached handlers still match, and kernels can move between private modules.
    # Goes under @numba.njit: the dispatcher copies the module when it is made.
    fn.__module__ = _PUBLIC_MODULE
    return fn


def config(
    name: str, args: tuple[Any, ...], kernel_kwargs: dict[str, Any], **data_kwargs: Any
) -> BenchmarkConfig:
    return BenchmarkConfig(name, args, kernel_kwargs=kernel_kwargs, data_kwargs=data_kwargs)
