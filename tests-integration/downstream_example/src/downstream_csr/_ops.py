"""``csr_matvec``: ``y = A @ v`` (or ``A.T @ v``) for a CSR matrix ``A``.

One ``XLACustomKernel`` with a numba backend (the default on the CPU) and a
pure-JAX one, a JVP rule in the vector (the matrix's values are declared not
differentiable), a transpose rule, a sharding rule and benchmark data.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numba
import numpy as np
import xla_custom_kernel as xck
from ffi_core import ShardingRule
from jax.interpreters import ad
from kernel_bench import BenchmarkConfig

__all__ = ["csr_matvec", "random_csr"]


def random_csr(
    m: int, n: int, p: float, *, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(data, indices, indptr)`` of an ``m x n`` float32 CSR matrix with
    about a fraction ``p`` of non-zeros, columns sorted within rows."""
    rng = np.random.default_rng(seed)
    counts = rng.binomial(n, p, size=m)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    indices = np.concatenate(
        [np.sort(rng.choice(n, c, replace=False)) for c in counts] or [np.zeros(0)]
    ).astype(np.int32)
    data = rng.standard_normal(indices.size).astype(np.float32)
    return data, indices, indptr


@numba.njit
def _matvec(data, indices, indptr, v, out):
    for r in range(indptr.size - 1):
        acc = out.dtype.type(0)
        for k in range(indptr[r], indptr[r + 1]):
            acc += data[k] * v[indices[k]]
        out[r] = acc


@numba.njit
def _matvec_transposed(data, indices, indptr, v, out):
    out[:] = 0
    for r in range(indptr.size - 1):
        for k in range(indptr[r], indptr[r + 1]):
            out[indices[k]] += data[k] * v[r]


def _matvec_jax(data, indices, indptr, v, *, shape, transpose):
    rows = jnp.repeat(
        jnp.arange(shape[0], dtype=indptr.dtype), jnp.diff(indptr), total_repeat_length=data.size
    )
    if transpose:
        return jax.ops.segment_sum(data * v[rows], indices, num_segments=shape[1])
    return jax.ops.segment_sum(data * v[indices], rows, num_segments=shape[0])


csr_matvec = xck.XLACustomKernel("csr_matvec", doc="y = A @ v for a CSR matrix A of `shape`.")
csr_matvec.def_tags("sparse")
csr_matvec.def_numba_kernel(
    lambda outs, shape, transpose: _matvec_transposed if transpose else _matvec
)
csr_matvec.def_jax_kernel(
    lambda outs, shape, transpose: (
        lambda d, i, p, v: _matvec_jax(d, i, p, v, shape=shape, transpose=transpose)
    )
)
# Linear in v: the tangent is the same product of the tangent vector.
csr_matvec.def_jvp_rule2(
    xck.NOT_DIFFERENTIABLE,
    None,
    None,
    lambda t, d, i, p, v, outs, shape, transpose: csr_matvec(
        d, i, p, t, outs=outs, shape=shape, transpose=transpose
    ),
)


@csr_matvec.def_transpose_rule
def _transpose(cts, data, indices, indptr, v, *, outs, shape, transpose):
    (ct,) = cts
    if not ad.is_undefined_primal(v):
        raise NotImplementedError("csr_matvec is transposed in its vector only")
    n = shape[0] if transpose else shape[1]
    ct_v = csr_matvec(
        data,
        indices,
        indptr,
        ct,
        outs=jax.ShapeDtypeStruct((n,), ct.dtype),
        shape=shape,
        transpose=not transpose,
    )
    return [None, None, None, ct_v]


# The vector is read at any column, so each device needs it whole; the
# structure (values, indices, row pointers) is kept whole as inputs-only
# factors are. A vmap batch of vectors is what a sharded jit splits.
csr_matvec.def_sharding_rule(ShardingRule("nnz, nnz, ptr, k -> i", need_replication_factors=("k",)))


@csr_matvec.def_call
def _call(data, indices, indptr, v, *, shape, transpose=False):
    shape = (int(shape[0]), int(shape[1]))
    rows = shape[1] if transpose else shape[0]
    return csr_matvec(
        data,
        indices,
        indptr,
        v,
        outs=jax.ShapeDtypeStruct((rows,), v.dtype),
        shape=shape,
        transpose=bool(transpose),
    )


@csr_matvec.def_benchmark_data
def _benchmark_data(*, platform: str) -> Iterator[BenchmarkConfig]:
    del platform
    for n, p in ((1_000, 0.01), (10_000, 0.001)):
        data, indices, indptr = random_csr(n, n, p, seed=1)
        v = np.random.default_rng(2).standard_normal(n).astype(np.float32)
        kwargs: dict[str, Any] = {"shape": (n, n)}
        yield BenchmarkConfig(
            f"n={n} p={p}", (data, indices, indptr, v), kernel_kwargs=kwargs, data_kwargs={"n": n}
        )
