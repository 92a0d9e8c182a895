"""``axpy``: ``a * x + y``, the smallest elementwise example."""

from __future__ import annotations

from collections.abc import Iterator

import jax
import numba
import numpy as np
from xla_custom_kernel import XLACustomKernel

from .._config import BenchmarkConfig
from ._common import NAMESPACE, check_vectors, config, stable_ffi_name
from ._scale import sizes

try:
    from . import _warp_kernels
except ImportError:  # warp-ffi is optional (kernel-bench[warp]): no warp backend without it
    _warp_kernels = None  # type: ignore[assignment]

__all__ = ["axpy"]


@numba.njit(parallel=True, fastmath=True)
@stable_ffi_name
def _axpy_numba(x, y, a, out):
    for i in numba.prange(x.size):
        out[i] = a[0] * x[i] + y[i]


axpy = XLACustomKernel(
    f"{NAMESPACE}axpy", doc="a * x + y for vectors x, y and a scalar a (shape (1,))."
)
axpy.def_tags("example", "elementwise")
# Under a sharded jit each device computes its slice of x and y; `a` (shape (1,)) whole.
axpy.def_sharding_rule("i, i, a -> i")
axpy.def_numba_kernel(lambda outs: _axpy_numba)
axpy.def_jax_kernel(lambda outs: lambda x, y, a: a[0] * x + y)
if _warp_kernels is not None:
    axpy.def_warp_kernel(lambda outs: _warp_kernels.axpy_kernel)
axpy.def_jvp_rule2(
    lambda t, x, y, a, outs: a[0] * t,
    lambda t, x, y, a, outs: t,
    lambda t, x, y, a, outs: t[0] * x,
)


@axpy.def_call
def _axpy_call(x: jax.Array, y: jax.Array, a: jax.Array) -> jax.Array:
    check_vectors("axpy", x=x, y=y)
    if np.shape(a) != (1,) or np.dtype(a.dtype) != np.dtype(x.dtype):
        raise ValueError(
            f"input 2 (`a`) of axpy must have shape (1,) and the dtype of `x`, {np.dtype(x.dtype)}, "
            f"got {np.dtype(a.dtype)}{list(np.shape(a))}"
        )
    return axpy(x, y, a, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))


@axpy.def_benchmark_data
def _axpy_data(*, platform: str) -> Iterator[BenchmarkConfig]:
    rng = np.random.default_rng(0)
    for n in sizes([10_000], [10_000, 1_000_000], [10_000, 1_000_000, 10_000_000]):
        x, y = (rng.standard_normal(n, dtype=np.float32) for _ in range(2))
        yield config(f"n={n:.0e}", (x, y, np.array([0.5], np.float32)), {}, n=n)
