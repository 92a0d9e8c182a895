"""What every example module builds on: kernels whose FFI target names stay put,
and benchmark cases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from .._cli_common import EXAMPLES_PREFIX
from .._config import BenchmarkConfig

__all__ = ["NAMESPACE", "check_vectors", "config", "stable_ffi_name"]

#: The prefix of the bundled examples' kernel names
#: (``kernel_bench.examples.csr_matvec``): kernel names are unique in a
#: process, so the examples take names no user's operation takes.
NAMESPACE = EXAMPLES_PREFIX

# The dtypes the elementwise examples' kernels are written for.
VECTOR_DTYPES = ("float32", "float64")

F = TypeVar("F", bound=Callable[..., Any])

# The module every example kernel is named after, wherever it is defined.
_PUBLIC_MODULE = "kernel_bench.examples"


def stable_ffi_name(fn: F) -> F:
    # FFI target names (and the handlers Numba caches on disk) digest the
    # kernel's module and qualified name (ffi_core.bridge.function_digest). Naming the
    # public module, not the private one a kernel happens to live in, keeps the
    # names independent of the private modules, so programs saved with
    # jax.export and cached handlers match whichever private module holds a kernel.
    # Goes under @numba.njit: the dispatcher copies the module when it is made.
    fn.__module__ = _PUBLIC_MODULE
    return fn


def check_vectors(op: str, **inputs: Any) -> None:
    """Check the inputs of an elementwise example (in call order, by name):
    vectors of one shape and a dtype of ``VECTOR_DTYPES``. Its Numba kernels
    index with ``range(x.size)``: a matrix would make them write past the
    output, so it is refused before anything is traced.

    Raises:
        TypeError: an input is not float32 or float64.
        ValueError: an input is not a vector, or not of the first one's shape.
    """
    first_name, first = next(iter(inputs.items()))
    for i, (name, x) in enumerate(inputs.items()):
        dtype = np.dtype(x.dtype)
        if dtype.name not in VECTOR_DTYPES:
            raise TypeError(
                f"input {i} (`{name}`) of {op} must be {' or '.join(VECTOR_DTYPES)}, got {dtype}"
            )
        if np.ndim(x) != 1:
            raise ValueError(
                f"input {i} (`{name}`) of {op} must be a vector (1-d), got shape {tuple(np.shape(x))}"
            )
        if np.shape(x) != np.shape(first):
            raise ValueError(
                f"input {i} (`{name}`) of {op} must have the shape of `{first_name}`, "
                f"{tuple(np.shape(first))}, got {tuple(np.shape(x))}"
            )


def config(
    name: str, args: tuple[Any, ...], kernel_kwargs: dict[str, Any], **data_kwargs: Any
) -> BenchmarkConfig:
    return BenchmarkConfig(name, args, kernel_kwargs=kernel_kwargs, data_kwargs=data_kwargs)
