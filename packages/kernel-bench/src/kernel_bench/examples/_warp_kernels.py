"""The ``warp`` backend of ``axpy``, ``lif_step``, ``csr_matvec`` and
``csr_matmat`` (which a vmap of ``csr_matvec`` calls): Warp kernels computing
what their numba kernels compute, on the same inputs, outputs and dtypes.

Importing this module raises ImportError where warp-ffi is not installed
(``uv add "kernel-bench[warp]"``); the examples then register no warp backend.
Warp reads a kernel's source, so the kernels are module-level functions of this
file. On the CPU Warp runs a launch's threads one after another.
"""

# The kernels are Warp's language, not Python's: their annotations are Warp types
# (calls such as wp.array(dtype=Any)), wp.tid() is an int or a tuple by the launch's
# dimensions, and Warp's scalar types take each other. A type checker reads them as
# Python, so these codes, which only the kernels raise, are off for this file.
# mypy: disable-error-code="valid-type, arg-type, operator, misc"

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import warp as wp
import warp_ffi

__all__ = ["axpy_kernel", "csr_matmat_kg", "csr_matvec_kg", "lif_step_kernel"]


@wp.kernel
def axpy_kernel(
    x: wp.array(dtype=Any),
    y: wp.array(dtype=Any),
    a: wp.array(dtype=Any),
    out: wp.array(dtype=Any),
):
    i = wp.tid()
    out[i] = a[0] * x[i] + y[i]


# dt and tau are float64, as the numba kernel generator computes dt / tau
# before rounding it to float32. The call's static keywords of the same names
# fill these parameters (XLACustomKernel.def_warp_kernel).
@wp.kernel
def lif_step_kernel(
    v: wp.array(dtype=wp.float32),
    i_ext: wp.array(dtype=wp.float32),
    dt: wp.float64,
    tau: wp.float64,
    v_th: wp.float64,
    v_reset: wp.float64,
    v_out: wp.array(dtype=wp.float32),
    spike: wp.array(dtype=wp.bool),
):
    k = wp.tid()
    alpha = wp.float32(dt / tau)
    x = v[k] + alpha * (i_ext[k] - v[k])
    fired = x >= wp.float32(v_th)
    spike[k] = fired
    if fired:
        v_out[k] = wp.float32(v_reset)
    else:
        v_out[k] = x


# A @ B: one thread per entry of the output (a row of A and a column of B),
# summing in the order the numba kernel does: no two threads write one entry.
@wp.kernel
def csr_matmat_kernel(
    data: wp.array(dtype=Any),
    indices: wp.array(dtype=wp.int32),
    indptr: wp.array(dtype=wp.int32),
    b: wp.array2d(dtype=Any),
    out: wp.array2d(dtype=Any),
):
    r, j = wp.tid()
    acc = out.dtype(0)
    for t in range(indptr[r], indptr[r + 1]):
        acc += data[t] * b[indices[t], j]
    out[r, j] = acc


# A.T @ B: the rows of A scatter into shared entries, so the sums are atomic
# adds into an output that starts as zeros (`start`, aliased to `out`).
@wp.kernel
def csr_matmat_t_kernel(
    data: wp.array(dtype=Any),
    indices: wp.array(dtype=wp.int32),
    indptr: wp.array(dtype=wp.int32),
    b: wp.array2d(dtype=Any),
    start: wp.array2d(dtype=Any),
    out: wp.array2d(dtype=Any),
):
    r, j = wp.tid()
    for t in range(indptr[r], indptr[r + 1]):
        wp.atomic_add(out, indices[t], j, data[t] * b[r, j])


def _product_kg(*, vector: bool) -> Callable[..., Any]:
    # The kernel generator of csr_matvec (vector=True) or csr_matmat. The Warp
    # kernels take matrices: csr_matvec's vector is the one column of a
    # matrix (a reshape, which XLA does without a copy). A.T @ B runs one
    # thread per row of A (and column of B) over zeros as the output's
    # starting value (outputs start uninitialized); the backend adapter passes
    # no aliases, so each op is wrapped here.
    def kg(outs: Any, *, shape: tuple[int, int], transpose: bool) -> Any:
        columns = jax.ShapeDtypeStruct((outs.shape[0], 1), outs.dtype) if vector else outs
        if transpose:
            op = warp_ffi.warp_kernel(
                csr_matmat_t_kernel,
                columns,
                launch_dims=(shape[0], columns.shape[1]),
                input_output_aliases={4: 0},
            )

            def product(data: Any, indices: Any, indptr: Any, b: Any) -> Any:
                return op(data, indices, indptr, b, jnp.zeros(columns.shape, columns.dtype))

        else:
            product = warp_ffi.warp_kernel(csr_matmat_kernel, columns)
        if not vector:
            return product

        def call(data: Any, indices: Any, indptr: Any, v: Any) -> Any:
            return product(data, indices, indptr, v[:, None]).reshape(outs.shape)

        return call

    return kg


csr_matvec_kg = _product_kg(vector=True)
csr_matmat_kg = _product_kg(vector=False)
