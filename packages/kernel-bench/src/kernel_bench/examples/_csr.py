"""``csr_matvec`` and ``csr_matmat``: a CSR sparse matrix times a dense vector or
matrix, with JVP and transpose rules.

Both take ``(data, indices, indptr, x)`` with static ``shape`` (of the sparse
matrix) and ``transpose``, and are linear in ``data`` and in ``x``; they share
their ``jax.experimental.sparse`` backend, JVP and transpose rules and the
body of the call function, and differ in the Numba kernels, the pure-JAX
reference and the shapes. ``csr_matvec`` turns a vmap over vectors into one
``csr_matmat``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numba
import numpy as np
from jax.experimental import sparse as jsparse
from xla_custom_kernel import XLACustomKernel

from .._config import BenchmarkConfig
from ._common import NAMESPACE, config, stable_ffi_name
from ._scale import sizes

try:
    from . import _warp_kernels
except ImportError:  # warp-ffi is optional (kernel-bench[warp]): no warp backend without it
    _warp_kernels = None  # type: ignore[assignment]

__all__ = ["csr_matmat", "csr_matvec", "random_csr"]


def random_csr(
    m: int, n: int, p: float, *, seed: int = 0, dtype: Any = np.float32
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(data, indices, indptr)`` of an ``m x n`` CSR matrix with about a
    fraction ``p`` of non-zeros (int32 indices, sorted within rows)."""
    rng = np.random.default_rng(seed)
    counts = rng.binomial(n, p, size=m)
    indptr = np.zeros(m + 1, np.int32)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), np.int32)
    for r in range(m):
        indices[indptr[r] : indptr[r + 1]] = np.sort(rng.choice(n, counts[r], replace=False))
    data = rng.standard_normal(indices.size).astype(dtype)
    return data, indices, indptr


def _autotune_data(data, indices, indptr, x, *, outs, shape, transpose):
    # What the autotuner times the backends on, for the shapes of a call: a
    # valid CSR matrix of the call's number of non-zeros spread evenly over its
    # rows, random columns and values (the default, zero indices, would time
    # an empty matrix).
    del outs, transpose
    rng = np.random.default_rng(0)
    m, n = shape
    nnz = data.shape[0]
    ptr = (np.arange(m + 1, dtype=np.int64) * nnz // max(m, 1)).astype(indptr.dtype)
    cols = rng.integers(0, max(n, 1), nnz).astype(indices.dtype)
    values = rng.standard_normal(nnz).astype(data.dtype)
    return values, cols, ptr, rng.standard_normal(x.shape).astype(x.dtype)


def _rows(indptr: jax.Array, nnz: int) -> jax.Array:
    m = indptr.shape[0] - 1
    return jnp.repeat(jnp.arange(m, dtype=indptr.dtype), jnp.diff(indptr), total_repeat_length=nnz)


def _bcoo(data, indices, indptr, shape):
    rows = _rows(indptr, data.shape[0])
    return jsparse.BCOO((data, jnp.stack([rows, indices], axis=1)), shape=shape)


def _def_product(
    kernel: XLACustomKernel,
    numba_kernels: tuple[Any, Any],
    reference: Callable[..., jax.Array],
    out: Callable[[tuple[int, int], bool, Any], jax.ShapeDtypeStruct],
    ct_data: Callable[[jax.Array, jax.Array, jax.Array, jax.Array, bool], jax.Array],
    warp_kg: Callable[..., Any] | None,
) -> None:
    # The backends and rules are the same for a vector and a matrix operand but
    # for these pieces: `numba_kernels` is (A @ x, A.T @ x); `out(shape,
    # transpose, x)` the result's ShapeDtypeStruct; `ct_data(ct, x, indices,
    # rows, transpose)` the cotangent of the values; `warp_kg` the warp backend's
    # kernel generator, None where warp-ffi is not installed.
    plain, transposed = numba_kernels
    kernel.def_tags("example", "sparse")
    kernel.def_autotune_data(_autotune_data)
    kernel.def_numba_kernel(lambda outs, shape, transpose: transposed if transpose else plain)
    kernel.def_jax_kernel(
        lambda outs, shape, transpose: (
            lambda d, i, p, x: reference(d, i, p, x, shape=shape, transpose=transpose)
        )
    )
    kernel.def_kernel(
        "jax_sparse",
        "cpu",
        lambda outs, shape, transpose: (
            lambda d, i, p, x: (_bcoo(d, i, p, shape).T if transpose else _bcoo(d, i, p, shape)) @ x
        ),
        batching="vmap",
    )
    if warp_kg is not None:
        kernel.def_warp_kernel(warp_kg)
    kernel.def_jvp_rule2(
        lambda t, d, i, p, x, outs, shape, transpose: kernel(
            t, i, p, x, outs=outs, shape=shape, transpose=transpose
        ),
        None,
        None,
        lambda t, d, i, p, x, outs, shape, transpose: kernel(
            d, i, p, t, outs=outs, shape=shape, transpose=transpose
        ),
    )

    @kernel.def_transpose_rule
    def _transpose(cts, data, indices, indptr, x, *, outs, shape, transpose):
        (ct,) = cts
        if jax.interpreters.ad.is_undefined_primal(x):
            ct_x = kernel(
                data,
                indices,
                indptr,
                ct,
                outs=out(shape, not transpose, ct),
                shape=shape,
                transpose=not transpose,
            )
            return [None, None, None, ct_x]
        rows = _rows(indptr, indices.shape[0])
        return [ct_data(ct, x, indices, rows, transpose), None, None, None]


def _call(kernel, out, data, indices, indptr, x, shape, transpose):
    # The body of both call functions; they keep their own signatures, since
    # callers may name the dense operand (`v=`, `b=`).
    shape = tuple(int(s) for s in shape)
    return kernel(
        data,
        indices,
        indptr,
        x,
        outs=out(shape, transpose, x),
        shape=shape,
        transpose=bool(transpose),
    )


def _csr_data(seed: int, dense_seed: int, k: int | None = None) -> Iterator[BenchmarkConfig]:
    # The dense operand is a vector where k is None, else a matrix of k columns.
    cases = sizes(
        [(1_000, 0.01)],
        [(1_000, 0.01), (10_000, 0.01), (100_000, 0.0001)],
        [(1_000, 0.01), (10_000, 0.01), (100_000, 0.001), (100_000, 0.01)],
    )
    columns = {} if k is None else {"k": k}
    # One matrix at a time: at the full scale one holds 10^8 non-zeros.
    for n, p in cases:
        csr = random_csr(n, n, p, seed=seed)
        dense = np.random.default_rng(dense_seed).standard_normal(n if k is None else (n, k))
        yield config(
            f"n={n:.0e} p={p:g}" + ("" if k is None else f" k={k}"),
            (*csr, dense.astype(np.float32)),
            {"shape": (n, n), "transpose": False},
            n=n,
            p=p,
            **columns,
            nnz=int(csr[0].size),
        )


# --------------------------------------------------------------------- A @ v


@numba.njit(parallel=True, fastmath=True)
@stable_ffi_name
def _csr_matvec_numba(data, indices, indptr, v, out):
    for r in numba.prange(indptr.size - 1):
        acc = out.dtype.type(0)
        for k in range(indptr[r], indptr[r + 1]):
            acc += data[k] * v[indices[k]]
        out[r] = acc


# Serial: rows of A scatter into the same entries of A.T @ v.
@numba.njit
@stable_ffi_name
def _csr_matvec_t_numba(data, indices, indptr, v, out):
    out[:] = 0
    for r in range(indptr.size - 1):
        for k in range(indptr[r], indptr[r + 1]):
            out[indices[k]] += data[k] * v[r]


def _csr_matvec_jax(data, indices, indptr, v, *, shape, transpose):
    rows = _rows(indptr, data.shape[0])
    if transpose:
        return jax.ops.segment_sum(data * v[rows], indices, num_segments=shape[1])
    return jax.ops.segment_sum(data * v[indices], rows, num_segments=shape[0])


def _csr_matvec_out(shape: tuple[int, int], transpose: bool, v: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((shape[1] if transpose else shape[0],), v.dtype)


def _csr_matvec_ct_data(ct, v, indices, rows, transpose):
    return ct[indices] * v[rows] if transpose else ct[rows] * v[indices]


csr_matvec = XLACustomKernel(
    f"{NAMESPACE}csr_matvec",
    doc="y = A @ v (or A.T @ v with transpose=True) for a CSR matrix A of `shape`.",
)
_def_product(
    csr_matvec,
    (_csr_matvec_numba, _csr_matvec_t_numba),
    _csr_matvec_jax,
    _csr_matvec_out,
    _csr_matvec_ct_data,
    None if _warp_kernels is None else _warp_kernels.csr_matvec_kg,
)


@csr_matvec.def_call
def _csr_matvec_call(data, indices, indptr, v, *, shape, transpose=False):
    return _call(csr_matvec, _csr_matvec_out, data, indices, indptr, v, shape, transpose)


@csr_matvec.def_batching_rule
def _csr_matvec_batching(args, dims, *, outs, shape, transpose):
    # A batch of vectors against one matrix is a sparse-dense matrix product:
    # the sparse structure is read once, and each non-zero meets a contiguous
    # row of the batch. Other cases use the default batching.
    data, indices, indptr, v = args
    if tuple(dims[:3]) != (None, None, None) or dims[3] is None:
        return NotImplemented
    b = jnp.moveaxis(v, dims[3], 1)  # (rows of the operand, batch)
    out = csr_matmat(
        data,
        indices,
        indptr,
        b,
        outs=_csr_matmat_out(shape, transpose, b),
        shape=shape,
        transpose=transpose,
    )
    return [out], [1]


@csr_matvec.def_benchmark_data
def _csr_matvec_data(*, platform: str) -> Iterator[BenchmarkConfig]:
    return _csr_data(2, 3)


# --------------------------------------------------------------------- A @ B


@numba.njit(parallel=True, fastmath=True)
@stable_ffi_name
def _csr_matmat_numba(data, indices, indptr, b, out):
    k = b.shape[1]
    for r in numba.prange(indptr.size - 1):
        for j in range(k):
            out[r, j] = 0
        for t in range(indptr[r], indptr[r + 1]):
            col, a = indices[t], data[t]
            for j in range(k):
                out[r, j] += a * b[col, j]


# Serial: rows of A scatter into the same rows of A.T @ B.
@numba.njit
@stable_ffi_name
def _csr_matmat_t_numba(data, indices, indptr, b, out):
    out[:] = 0
    k = b.shape[1]
    for r in range(indptr.size - 1):
        for t in range(indptr[r], indptr[r + 1]):
            col, a = indices[t], data[t]
            for j in range(k):
                out[col, j] += a * b[r, j]


def _csr_matmat_jax(data, indices, indptr, b, *, shape, transpose):
    rows = _rows(indptr, data.shape[0])
    if transpose:
        return jax.ops.segment_sum(data[:, None] * b[rows], indices, num_segments=shape[1])
    return jax.ops.segment_sum(data[:, None] * b[indices], rows, num_segments=shape[0])


def _csr_matmat_out(shape: tuple[int, int], transpose: bool, b: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((shape[1] if transpose else shape[0], b.shape[1]), b.dtype)


def _csr_matmat_ct_data(ct, b, indices, rows, transpose):
    return _csr_matvec_ct_data(ct, b, indices, rows, transpose).sum(axis=1)


csr_matmat = XLACustomKernel(
    f"{NAMESPACE}csr_matmat",
    doc="Y = A @ B (or A.T @ B with transpose=True) for a CSR matrix A of `shape`.",
)
_def_product(
    csr_matmat,
    (_csr_matmat_numba, _csr_matmat_t_numba),
    _csr_matmat_jax,
    _csr_matmat_out,
    _csr_matmat_ct_data,
    None if _warp_kernels is None else _warp_kernels.csr_matmat_kg,
)
# The columns of B (a batch of vectors: vmap of csr_matvec lands here) are
# independent: under a sharded jit each device multiplies A by its columns.
# A's arrays and the rows of B and Y stay whole.
csr_matmat.def_sharding_rule("nnz, nnz, ptr, k b -> m b")


@csr_matmat.def_call
def _csr_matmat_call(data, indices, indptr, b, *, shape, transpose=False):
    return _call(csr_matmat, _csr_matmat_out, data, indices, indptr, b, shape, transpose)


@csr_matmat.def_benchmark_data
def _csr_matmat_data(*, platform: str) -> Iterator[BenchmarkConfig]:
    return _csr_data(4, 5, k=16)
