"""Tutorial 1: Numba CPU kernels as JAX operations.

Run it: ``uv run python docs/numba_cpu_kernels.py``. Every step asserts its
result, so this file doubles as a test (CI runs it).

A kernel is an ``@numba.njit`` function with the convention
``kernel(in_1, ..., in_n, out_1, ..., out_m)``: it reads its inputs, writes its
outputs in place and returns nothing. ``numba_kernel`` turns it into a function
on JAX arrays. XLA calls a native handler generated for the kernel's dtypes and
ranks, so a call costs about as much as one of XLA's own operations.
"""

import jax
import jax.numpy as jnp
import numba
import numpy as np
from kernel_check import check_kernel
from numba_cpu_ffi import numba_kernel

# --- 1. Elementwise -------------------------------------------------------


@numba.njit
def axpy(a, x, y, out):
    # `a` is a 0-d array: read it with a[()].
    for i in range(x.size):
        out[i] = a[()] * x[i] + y[i]


x = jnp.linspace(0.0, 1.0, 5, dtype=jnp.float32)
y = jnp.ones(5, jnp.float32)
a = jnp.float32(2.0)
axpy_op = numba_kernel(axpy, jax.ShapeDtypeStruct(x.shape, x.dtype))
np.testing.assert_allclose(axpy_op(a, x, y), 2 * x + y)  # eagerly
np.testing.assert_allclose(jax.jit(axpy_op)(a, x, y), 2 * x + y)  # under jit

# Shapes are read at run time: the same compiled kernel and native handler
# serve any length. The output shape given in `outs` is what JAX allocates, so
# build an op per output shape.
z = jnp.arange(1000, dtype=jnp.float32)
big = numba_kernel(axpy, jax.ShapeDtypeStruct(z.shape, z.dtype))(a, z, z)
np.testing.assert_allclose(big, 3 * z)

# --- 2. A reduction, and several outputs of different dtypes ---------------


@numba.njit
def stats(x, count_positive, total):
    s = 0.0
    n = 0
    for v in x.ravel():
        s += v
        n += v > 0
    total[()] = s
    count_positive[()] = n


m = jnp.asarray([[1.0, -2.0], [3.0, 4.0]], jnp.float32)
# Outputs reach the kernel in the pytree's flattening order: for a dict, sorted
# by key ("count" before "total").
stats_op = numba_kernel(
    stats,
    {"total": jax.ShapeDtypeStruct((), jnp.float32), "count": jax.ShapeDtypeStruct((), jnp.int32)},
)
out = jax.jit(stats_op)(m)  # the same pytree as `outs` comes back
assert float(out["total"]) == 6.0 and int(out["count"]) == 3

# --- 3. Parallel kernels with prange ----------------------------------------


@numba.njit(parallel=True)
def row_norms(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = np.sqrt((x[i] ** 2).sum())


r = jnp.arange(12.0, dtype=jnp.float32).reshape(4, 3)
norms = numba_kernel(row_norms, jax.ShapeDtypeStruct((4,), jnp.float32))(r)
np.testing.assert_allclose(norms, jnp.linalg.norm(r, axis=1), rtol=1e-6)

# --- 4. vmap ----------------------------------------------------------------
# By default a batched call is ONE native call that loops over the batch
# (across threads when the batch holds enough work, see
# `numba_cpu_ffi.parallel_min_elements()`; this small batch runs on one
# thread). The kernel still sees one batch element at a time, so kernels that
# couple elements stay right.


@numba.njit
def cumsum(x, out):
    acc = 0.0
    for i in range(x.size):
        acc += x[i]
        out[i] = acc


rows = jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4)
cumsum_op = numba_kernel(cumsum, jax.ShapeDtypeStruct((4,), jnp.float32))
np.testing.assert_allclose(jax.vmap(cumsum_op)(rows), jnp.cumsum(rows, axis=1))
# jax.ffi's methods are accepted too: one kernel call per row inside an XLA loop.
seq = numba_kernel(cumsum, jax.ShapeDtypeStruct((4,), jnp.float32), vmap_method="sequential")
np.testing.assert_allclose(jax.jit(jax.vmap(seq))(rows), jnp.cumsum(rows, axis=1))
# check_kernel compares vmap with a loop over rows that differ (the batch axis
# first and last, nested), for each vmap_method given; Tutorial 8 shows it all.
# It is the kernel-check package's: a test dependency (`pip install kernel-check`).
report = check_kernel(
    cumsum_op,
    rows[0],
    reference=np.cumsum,
    checks=["results", "vmap"],
    vmap_methods=[None, "sequential", "sequential_unrolled"],
)
assert report.ok and len(report.passed) == 9

# --- 5. In-place updates with input_output_aliases -------------------------


@numba.njit
def add_one_inplace(x, out):
    # `out` is the same buffer as `x`.
    for i in range(out.size):
        out[i] += 1


inc = numba_kernel(
    add_one_inplace, jax.ShapeDtypeStruct((5,), jnp.float32), input_output_aliases={0: 0}
)
buf = jnp.zeros(5, jnp.float32)
np.testing.assert_allclose(jax.jit(inc, donate_argnums=0)(buf), np.ones(5))
assert buf.is_deleted()  # donated: XLA wrote into it, no copy was made
# The same, checked: the output reuses the donated buffer, no other input changes.
assert check_kernel(inc, jnp.zeros(5, jnp.float32), checks=["aliases"]).ok

# --- 6. Errors --------------------------------------------------------------
# A kernel that raises gives a Python exception naming the kernel; the process
# and the op keep working.


@numba.njit
def checked_sqrt(x, out):
    for i in range(x.size):
        if x[i] < 0:
            raise ValueError("negative input")
        out[i] = np.sqrt(x[i])


sqrt_op = jax.jit(numba_kernel(checked_sqrt, jax.ShapeDtypeStruct((3,), jnp.float32)))
try:
    sqrt_op(jnp.asarray([1.0, -1.0, 4.0], jnp.float32)).block_until_ready()
except Exception as err:  # jax.errors.JaxRuntimeError
    assert "numba kernel 'checked_sqrt' raised ValueError: negative input" in str(err)
else:
    raise AssertionError("the kernel's exception was lost")
np.testing.assert_allclose(sqrt_op(jnp.asarray([1.0, 9.0, 4.0], jnp.float32)), [1, 3, 2])

# Bad input is refused before anything runs, with a message saying what is accepted.
try:
    axpy_op(a, x)  # one array short
except TypeError as err:
    assert "takes 4 arguments but is called with 2 inputs and 1 outputs" in str(err)

print("tutorial 1: all steps passed")
