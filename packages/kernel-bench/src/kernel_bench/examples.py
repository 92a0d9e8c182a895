"""The bundled example operations: each an ``XLACustomKernel`` with a Numba
backend and a pure-JAX reference (``"jax"``), plus ``jax.experimental.sparse``
for the sparse products.

- ``axpy``: ``a * x + y`` (elementwise);
- ``exp_trace``: ``trace * exp(-dt / tau) + spikes`` (elementwise, linear);
- ``csr_matvec`` / ``csr_matmat``: a CSR sparse matrix times a dense vector /
  matrix, with JVP and transpose rules (gradients with respect to the values
  and the dense operand);
- ``lif_step``: one Euler step of leaky integrate-and-fire neurons, returning
  the new potentials (float32) and the spikes (bool).

They are models for your own operations and the suite ``kernel-bench`` runs
with no arguments. Sizes of the benchmark data follow :func:`set_scale`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numba
import numpy as np
from jax.experimental import sparse as jsparse
from numba_cpu_ffi import numba_kernel
from xla_custom_kernel import XLACustomKernel

__all__ = [
    "SCALES",
    "axpy",
    "csr_matmat",
    "csr_matvec",
    "example_kernels",
    "exp_trace",
    "get_scale",
    "lif_step",
    "random_csr",
    "set_scale",
]

#: Sizes of the benchmark data: ``quick`` for a smoke run, ``default`` for a
#: run of well under a minute on two cores, ``full`` up to 10^5 neurons at 1 %
#: connectivity (10^8 non-zeros, several GB of memory).
SCALES = ("quick", "default", "full")
_scale = "default"


def set_scale(scale: str) -> None:
    """Choose the sizes the example benchmark data uses (one of :data:`SCALES`)."""
    global _scale
    if scale not in SCALES:
        raise ValueError(f"`scale` must be one of {', '.join(map(repr, SCALES))}, got {scale!r}")
    _scale = scale


def get_scale() -> str:
    """The scale set by :func:`set_scale` (``"default"`` initially)."""
    return _scale


def _config(
    name: str, args: tuple[Any, ...], kernel_kwargs: dict[str, Any], **data_kwargs: Any
) -> Any:
    from kernel_bench import BenchmarkConfig

    return BenchmarkConfig(name, args, kernel_kwargs=kernel_kwargs, data_kwargs=data_kwargs)


def _sizes(quick: list[int], default: list[int], full: list[int]) -> list[int]:
    return {"quick": quick, "default": default, "full": full}[_scale]


# --------------------------------------------------------------------- axpy


@numba.njit(parallel=True, fastmath=True)
def _axpy_numba(x, y, a, out):
    for i in numba.prange(x.size):
        out[i] = a[0] * x[i] + y[i]


axpy = XLACustomKernel("axpy", doc="a * x + y for vectors x, y and a scalar a (shape (1,)).")
axpy.def_tags("example", "elementwise")
axpy.def_numba_kernel(lambda outs: _axpy_numba)
axpy.def_jax_kernel(lambda outs: lambda x, y, a: a[0] * x + y)
axpy.def_jvp_rule2(
    lambda t, x, y, a, outs: a[0] * t,
    lambda t, x, y, a, outs: t,
    lambda t, x, y, a, outs: t[0] * x,
)


@axpy.def_call
def _axpy_call(x: jax.Array, y: jax.Array, a: jax.Array) -> jax.Array:
    return axpy(x, y, a, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))


@axpy.def_benchmark_data
def _axpy_data(*, platform: str) -> Iterator[Any]:
    rng = np.random.default_rng(0)
    for n in _sizes([10_000], [10_000, 1_000_000], [10_000, 1_000_000, 10_000_000]):
        x, y = (rng.standard_normal(n, dtype=np.float32) for _ in range(2))
        yield _config(f"n={n:.0e}", (x, y, np.float32([0.5])), {}, n=n)


# --------------------------------------------------------------------- exp_trace


@numba.njit(parallel=True, fastmath=True)
def _exp_trace_numba(trace, spikes, out, decay):
    for i in numba.prange(trace.size):
        out[i] = trace[i] * decay + spikes[i]


def _exp_trace_numba_kg(outs: Any, *, dt: float, tau: float) -> Any:
    decay = np.float32(math.exp(-dt / tau))

    @numba.njit
    def kernel(trace, spikes, out):
        _exp_trace_numba(trace, spikes, out, decay)

    return numba_kernel(kernel, outs)


exp_trace = XLACustomKernel(
    "exp_trace", doc="Exponential trace update: trace * exp(-dt / tau) + spikes."
)
exp_trace.def_tags("example", "elementwise", "snn")
exp_trace.def_numba_kernel(_exp_trace_numba_kg)
exp_trace.def_jax_kernel(
    lambda outs, dt, tau: (
        lambda trace, spikes: trace * jnp.exp(-dt / tau).astype(trace.dtype) + spikes
    )
)
exp_trace.def_jvp_rule2(
    lambda t, trace, spikes, outs, dt, tau: t * jnp.exp(-dt / tau).astype(t.dtype),
    lambda t, trace, spikes, outs, dt, tau: t,
)


@exp_trace.def_call
def _exp_trace_call(
    trace: jax.Array, spikes: jax.Array, *, dt: float = 0.1, tau: float = 10.0
) -> jax.Array:
    return exp_trace(
        trace, spikes, outs=jax.ShapeDtypeStruct(trace.shape, trace.dtype), dt=dt, tau=tau
    )


@exp_trace.def_benchmark_data
def _exp_trace_data(*, platform: str) -> Iterator[Any]:
    rng = np.random.default_rng(1)
    for n in _sizes([10_000], [10_000, 1_000_000], [10_000, 1_000_000, 10_000_000]):
        trace = rng.random(n, dtype=np.float32)
        spikes = (rng.random(n) < 0.02).astype(np.float32)
        yield _config(f"n={n:.0e}", (trace, spikes), {"dt": 0.1, "tau": 10.0}, n=n)


# --------------------------------------------------------------------- CSR products


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


def _rows(indptr: jax.Array, nnz: int) -> jax.Array:
    m = indptr.shape[0] - 1
    return jnp.repeat(jnp.arange(m, dtype=indptr.dtype), jnp.diff(indptr), total_repeat_length=nnz)


@numba.njit(parallel=True, fastmath=True)
def _csr_matvec_numba(data, indices, indptr, v, out):
    for r in numba.prange(indptr.size - 1):
        acc = out.dtype.type(0)
        for k in range(indptr[r], indptr[r + 1]):
            acc += data[k] * v[indices[k]]
        out[r] = acc


@numba.njit
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


def _bcoo(data, indices, indptr, shape):
    rows = _rows(indptr, data.shape[0])
    return jsparse.BCOO((data, jnp.stack([rows, indices], axis=1)), shape=shape)


csr_matvec = XLACustomKernel(
    "csr_matvec", doc="y = A @ v (or A.T @ v with transpose=True) for a CSR matrix A of `shape`."
)
csr_matvec.def_tags("example", "sparse")
csr_matvec.def_numba_kernel(
    lambda outs, shape, transpose: _csr_matvec_t_numba if transpose else _csr_matvec_numba
)
csr_matvec.def_jax_kernel(
    lambda outs, shape, transpose: (
        lambda d, i, p, v: _csr_matvec_jax(d, i, p, v, shape=shape, transpose=transpose)
    )
)
csr_matvec.def_kernel(
    "jax_sparse",
    "cpu",
    lambda outs, shape, transpose: (
        lambda d, i, p, v: (_bcoo(d, i, p, shape).T if transpose else _bcoo(d, i, p, shape)) @ v
    ),
    batching="vmap",
)


def _csr_matvec_out(shape: tuple[int, int], transpose: bool, dtype: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((shape[1] if transpose else shape[0],), dtype)


csr_matvec.def_jvp_rule2(
    lambda t, d, i, p, v, outs, shape, transpose: csr_matvec(
        t, i, p, v, outs=outs, shape=shape, transpose=transpose
    ),
    None,
    None,
    lambda t, d, i, p, v, outs, shape, transpose: csr_matvec(
        d, i, p, t, outs=outs, shape=shape, transpose=transpose
    ),
)


@csr_matvec.def_transpose_rule
def _csr_matvec_transpose(cts, data, indices, indptr, v, *, outs, shape, transpose):
    (ct,) = cts
    if jax.interpreters.ad.is_undefined_primal(v):
        ct_v = csr_matvec(
            data,
            indices,
            indptr,
            ct,
            outs=_csr_matvec_out(shape, not transpose, ct.dtype),
            shape=shape,
            transpose=not transpose,
        )
        return [None, None, None, ct_v]
    rows = _rows(indptr, indices.shape[0])
    ct_data = ct[indices] * v[rows] if transpose else ct[rows] * v[indices]
    return [ct_data, None, None, None]


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
        outs=_csr_matmat_out(shape, transpose, b.shape[1], b.dtype),
        shape=shape,
        transpose=transpose,
    )
    return [out], [1]


@csr_matvec.def_call
def _csr_matvec_call(data, indices, indptr, v, *, shape, transpose=False):
    shape = tuple(int(s) for s in shape)
    return csr_matvec(
        data,
        indices,
        indptr,
        v,
        outs=_csr_matvec_out(shape, transpose, v.dtype),
        shape=shape,
        transpose=bool(transpose),
    )


def _csr_data(seed: int) -> Iterator[tuple[int, float, tuple[np.ndarray, ...]]]:
    cases = {
        "quick": [(1_000, 0.01)],
        "default": [(1_000, 0.01), (10_000, 0.01), (100_000, 0.0001)],
        "full": [(1_000, 0.01), (10_000, 0.01), (100_000, 0.001), (100_000, 0.01)],
    }[_scale]
    for n, p in cases:
        yield n, p, random_csr(n, n, p, seed=seed)


@csr_matvec.def_benchmark_data
def _csr_matvec_data(*, platform: str) -> Iterator[Any]:
    for n, p, csr in _csr_data(2):
        v = np.random.default_rng(3).standard_normal(n).astype(np.float32)
        yield _config(
            f"n={n:.0e} p={p:g}",
            (*csr, v),
            {"shape": (n, n), "transpose": False},
            n=n,
            p=p,
            nnz=int(csr[0].size),
        )


@numba.njit(parallel=True, fastmath=True)
def _csr_matmat_numba(data, indices, indptr, b, out):
    k = b.shape[1]
    for r in numba.prange(indptr.size - 1):
        for j in range(k):
            out[r, j] = 0
        for t in range(indptr[r], indptr[r + 1]):
            col, a = indices[t], data[t]
            for j in range(k):
                out[r, j] += a * b[col, j]


@numba.njit
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


def _csr_matmat_out(shape, transpose, b_cols, dtype):
    return jax.ShapeDtypeStruct((shape[1] if transpose else shape[0], b_cols), dtype)


csr_matmat = XLACustomKernel(
    "csr_matmat", doc="Y = A @ B (or A.T @ B with transpose=True) for a CSR matrix A of `shape`."
)
csr_matmat.def_tags("example", "sparse")
csr_matmat.def_numba_kernel(
    lambda outs, shape, transpose: _csr_matmat_t_numba if transpose else _csr_matmat_numba
)
csr_matmat.def_jax_kernel(
    lambda outs, shape, transpose: (
        lambda d, i, p, b: _csr_matmat_jax(d, i, p, b, shape=shape, transpose=transpose)
    )
)
csr_matmat.def_kernel(
    "jax_sparse",
    "cpu",
    lambda outs, shape, transpose: (
        lambda d, i, p, b: (_bcoo(d, i, p, shape).T if transpose else _bcoo(d, i, p, shape)) @ b
    ),
    batching="vmap",
)
csr_matmat.def_jvp_rule2(
    lambda t, d, i, p, b, outs, shape, transpose: csr_matmat(
        t, i, p, b, outs=outs, shape=shape, transpose=transpose
    ),
    None,
    None,
    lambda t, d, i, p, b, outs, shape, transpose: csr_matmat(
        d, i, p, t, outs=outs, shape=shape, transpose=transpose
    ),
)


@csr_matmat.def_transpose_rule
def _csr_matmat_transpose(cts, data, indices, indptr, b, *, outs, shape, transpose):
    (ct,) = cts
    if jax.interpreters.ad.is_undefined_primal(b):
        ct_b = csr_matmat(
            data,
            indices,
            indptr,
            ct,
            outs=_csr_matmat_out(shape, not transpose, ct.shape[1], ct.dtype),
            shape=shape,
            transpose=not transpose,
        )
        return [None, None, None, ct_b]
    rows = _rows(indptr, indices.shape[0])
    if transpose:
        ct_data = (ct[indices] * b[rows]).sum(axis=1)
    else:
        ct_data = (ct[rows] * b[indices]).sum(axis=1)
    return [ct_data, None, None, None]


@csr_matmat.def_call
def _csr_matmat_call(data, indices, indptr, b, *, shape, transpose=False):
    shape = tuple(int(s) for s in shape)
    return csr_matmat(
        data,
        indices,
        indptr,
        b,
        outs=_csr_matmat_out(shape, transpose, b.shape[1], b.dtype),
        shape=shape,
        transpose=bool(transpose),
    )


@csr_matmat.def_benchmark_data
def _csr_matmat_data(*, platform: str) -> Iterator[Any]:
    for n, p, csr in _csr_data(4):
        k = 16
        b = np.random.default_rng(5).standard_normal((n, k)).astype(np.float32)
        yield _config(
            f"n={n:.0e} p={p:g} k={k}",
            (*csr, b),
            {"shape": (n, n), "transpose": False},
            n=n,
            p=p,
            k=k,
            nnz=int(csr[0].size),
        )


# --------------------------------------------------------------------- LIF step


def _lif_numba_kg(outs: Any, *, dt: float, tau: float, v_th: float, v_reset: float) -> Any:
    alpha = np.float32(dt / tau)
    th, reset = np.float32(v_th), np.float32(v_reset)

    @numba.njit(parallel=True, fastmath=True)
    def lif(v, i_ext, v_out, spike):
        for k in numba.prange(v.size):
            x = v[k] + alpha * (i_ext[k] - v[k])
            fired = x >= th
            spike[k] = fired
            v_out[k] = reset if fired else x

    return numba_kernel(lif, outs)


def _lif_jax(v, i_ext, *, dt, tau, v_th, v_reset):
    x = v + jnp.asarray(dt / tau, v.dtype) * (i_ext - v)
    spike = x >= v_th
    return jnp.where(spike, jnp.asarray(v_reset, v.dtype), x), spike


lif_step = XLACustomKernel(
    "lif_step",
    doc="One Euler step of leaky integrate-and-fire neurons: (new potentials, spikes).",
)
lif_step.def_tags("example", "snn")
lif_step.def_numba_kernel(_lif_numba_kg)
lif_step.def_jax_kernel(
    lambda outs, dt, tau, v_th, v_reset: (
        lambda v, i: _lif_jax(v, i, dt=dt, tau=tau, v_th=v_th, v_reset=v_reset)
    )
)


@lif_step.def_call
def _lif_call(v, i_ext, *, dt=0.1, tau=10.0, v_th=1.0, v_reset=0.0):
    outs = (jax.ShapeDtypeStruct(v.shape, v.dtype), jax.ShapeDtypeStruct(v.shape, jnp.bool_))
    return lif_step(v, i_ext, outs=outs, dt=dt, tau=tau, v_th=v_th, v_reset=v_reset)


@lif_step.def_benchmark_data
def _lif_data(*, platform: str) -> Iterator[Any]:
    rng = np.random.default_rng(6)
    for n in _sizes([10_000], [10_000, 100_000, 1_000_000], [10_000, 1_000_000, 10_000_000]):
        v = rng.random(n, dtype=np.float32)
        i_ext = (1.5 * rng.random(n)).astype(np.float32)
        kw = {"dt": 0.1, "tau": 10.0, "v_th": 1.0, "v_reset": 0.0}
        yield _config(f"n={n:.0e}", (v, i_ext), kw, n=n)


def example_kernels() -> list[XLACustomKernel]:
    """The example operations, in the order the suite runs them."""
    return [axpy, exp_trace, lif_step, csr_matvec, csr_matmat]
