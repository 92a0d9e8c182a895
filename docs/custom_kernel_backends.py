"""Tutorial 2: one operation, several backends, with XLACustomKernel.

Run it: ``uv run python docs/custom_kernel_backends.py``. Every step asserts
its result, so this file doubles as a test (CI runs it).

A library author defines an operation once, registers a kernel per backend and
platform, and JAX treats it as a primitive of its own: ``jit``, ``vmap``,
``grad`` and ``shard_map`` work, and the backend can be switched at run time.
We build a CSR sparse matrix times dense vector product step by step.
"""

import re

import jax
import jax.numpy as jnp
import numba
import numpy as np
import scipy.sparse as sp
import xla_custom_kernel as xck
from jax.interpreters import ad
from xla_custom_kernel.testing import check_kernel

# --- 1. The kernels ---------------------------------------------------------
# A numba kernel follows numba-cpu-ffi's convention: inputs, then outputs,
# written in place. A *kernel generator* kg(outs=..., **static_kwargs) returns
# the kernel for one call signature; it runs at lowering time, once per
# distinct signature. For the numba backend it may return the @njit function
# itself: it is then wrapped for `outs`, and its run-time errors name the
# operation and backend.


@numba.njit(parallel=True)
def spmv_numba(data, indices, indptr, v, out):
    for r in numba.prange(indptr.size - 1):
        acc = 0.0
        for k in range(indptr[r], indptr[r + 1]):
            acc += data[k] * v[indices[k]]
        out[r] = acc


@numba.njit
def spmv_t_numba(data, indices, indptr, v, out):  # A.T @ v, for the transpose rule
    out[:] = 0.0
    for r in range(indptr.size - 1):
        for k in range(indptr[r], indptr[r + 1]):
            out[indices[k]] += data[k] * v[r]


def row_ids(indptr, nnz):
    return jnp.repeat(jnp.arange(indptr.size - 1), jnp.diff(indptr), total_repeat_length=nnz)


def spmv_jax(data, indices, indptr, v, *, shape, transpose):  # the pure-JAX reference
    rows = row_ids(indptr, data.size)
    if transpose:
        return jax.ops.segment_sum(data * v[rows], indices, num_segments=shape[1])
    return jax.ops.segment_sum(data * v[indices], rows, num_segments=shape[0])


spmv = xck.XLACustomKernel("tutorial_spmv", doc="y = A @ v (A.T @ v with transpose=True)")
spmv.def_numba_kernel(lambda outs, shape, transpose: spmv_t_numba if transpose else spmv_numba)
spmv.def_jax_kernel(
    lambda outs, shape, transpose: lambda *args: spmv_jax(*args, shape=shape, transpose=transpose)
)
assert spmv.available_backends("cpu") == ["numba", "jax"]
assert spmv.get_default("cpu") == "numba"  # the first registered is the default
assert spmv.available_backends("gpu") == ["jax"]  # def_jax_kernel covers every platform

# --- 2. Calling -------------------------------------------------------------
# kernel(*inputs, outs=..., backend=None, **static_kwargs). Static keywords are
# part of the compiled signature and must be hashable (a tuple, not a list).
# def_call registers the friendly entry point that computes `outs`.


@spmv.def_call
def matvec(data, indices, indptr, v, *, shape, transpose=False):
    n_out = shape[1] if transpose else shape[0]
    return spmv(
        data,
        indices,
        indptr,
        v,
        outs=jax.ShapeDtypeStruct((n_out,), v.dtype),
        shape=tuple(shape),
        transpose=transpose,
    )


a = sp.random(300, 200, density=0.05, format="csr", dtype=np.float32, random_state=0)
data, indices, indptr = a.data, a.indices.astype(np.int32), a.indptr.astype(np.int32)
v = np.random.default_rng(1).standard_normal(200).astype(np.float32)

y = jax.jit(lambda d, v: matvec(d, indices, indptr, v, shape=a.shape))(data, v)
np.testing.assert_allclose(y, a @ v, rtol=1e-5, atol=1e-5)
y_ref = spmv.call(data, indices, indptr, v, shape=a.shape, backend="jax")  # forced backend
np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-5)

# --- 3. Switching backends ----------------------------------------------------
# Per call (backend=...), per kernel (set_default), or process-wide
# (xck.set_backend). A switch takes effect on the next call, also for functions
# jitted before it.
f = jax.jit(lambda d, v: matvec(d, indices, indptr, v, shape=a.shape))
assert "custom_call" in f.lower(data, v).as_text()  # numba: one FFI call
spmv.set_default("cpu", "jax")
assert "custom_call" not in f.lower(data, v).as_text()  # jax: plain XLA ops
np.testing.assert_allclose(f(data, v), a @ v, rtol=1e-5, atol=1e-5)
spmv.set_default("cpu", "numba")

# --- 4. Autodiff: JVP and transpose rules -----------------------------------
# def_jvp_rule2 takes one rule per input: rule(tangent, *primals, outs,
# **static) gives the output tangent due to that input (None: a zero
# derivative, here for the integer structure; xck.NOT_DIFFERENTIABLE would make
# differentiating in that input an error naming it). The product is linear in `data` and `v`, so
# the tangents are calls of the kernel itself.
spmv.def_jvp_rule2(
    lambda t, d, i, p, v, outs, shape, transpose: spmv(
        t, i, p, v, outs=outs, shape=shape, transpose=transpose
    ),
    None,
    None,
    lambda t, d, i, p, v, outs, shape, transpose: spmv(
        d, i, p, t, outs=outs, shape=shape, transpose=transpose
    ),
)


# For jax.grad, the linear calls are transposed. Linear inputs arrive as
# ad.UndefinedPrimal; return one cotangent per input (None where not linear).
@spmv.def_transpose_rule
def spmv_transpose(cts, d, i, p, v, *, outs, shape, transpose):
    (ct,) = cts
    if ad.is_undefined_primal(v):  # d/dv: A.T @ ct
        n = shape[0] if transpose else shape[1]
        ct_v = spmv(
            d,
            i,
            p,
            ct,
            outs=jax.ShapeDtypeStruct((n,), ct.dtype),
            shape=shape,
            transpose=not transpose,
        )
        return [None, None, None, ct_v]
    rows = row_ids(p, i.size)  # d/ddata: ct[row] * v[col]
    return [ct[i] * v[rows] if transpose else ct[rows] * v[i], None, None, None]


w = np.random.default_rng(2).standard_normal(300).astype(np.float32)
g_data, g_v = jax.grad(
    lambda d, v: jnp.dot(w, matvec(d, indices, indptr, v, shape=a.shape)), argnums=(0, 1)
)(data, v)
np.testing.assert_allclose(g_v, a.T @ w, rtol=1e-4, atol=1e-5)
# The rules against finite differences and each other (the transpose against
# the JVP), first and second order: step 7 checks them with check_kernel.

# --- 5. Batching ------------------------------------------------------------
# The default rule resolves batching when the call is lowered, per backend:
# numba and jax backends are vmapped, so a batch becomes ONE native call (the
# numba kernel loops over the batch). A backend registered with
# def_kernel(..., batching="loop"), or one whose callable cannot be vmapped,
# runs one call per element inside a single XLA loop instead.
vs = np.random.default_rng(3).standard_normal((16, 200)).astype(np.float32)
batched = jax.jit(jax.vmap(lambda v: matvec(data, indices, indptr, v, shape=a.shape)))
np.testing.assert_allclose(batched(vs), (a @ vs.T).T, rtol=1e-5, atol=1e-5)
text = batched.lower(vs).as_text()
assert text.count("stablehlo.custom_call") == 1 and "stablehlo.while" not in text
# Gradients compose with vmap both ways.
per_vector = jax.vmap(jax.grad(lambda v: matvec(data, indices, indptr, v, shape=a.shape).sum()))(vs)
np.testing.assert_allclose(per_vector, np.tile(a.T @ np.ones(300), (16, 1)), rtol=1e-4, atol=1e-4)

# A custom rule can do better: def_batching_rule(fun) with
# fun(args, dims, *, outs, **static) -> (outputs, out_dims), returning
# NotImplemented for the cases it leaves to the default rule. The bundled
# example kernel_bench.examples.csr_matvec turns a batch of vectors into one
# sparse-dense matrix product that way (about 15x faster than a loop of
# products for 32 vectors; see docs/performance.md).

# --- 6. Errors you can act on -------------------------------------------------
try:
    spmv.call(data, indices, indptr, v, shape=a.shape, backend="cuda_magic")
    raise AssertionError("an unknown backend should be refused")
except xck.UnknownBackendError as e:
    assert "unknown backend 'cuda_magic' for kernel 'tutorial_spmv'" in str(e)

# A kernel that raises at run time: the error names the operation, the backend
# and the exact call that switches to another backend.


@numba.njit
def strict_positive(x, out):
    for i in range(x.size):
        if x[i] < 0:
            raise ValueError("negative input")
        out[i] = x[i]


checked = xck.XLACustomKernel("tutorial_checked")
checked.def_numba_kernel(lambda outs: strict_positive)
checked.def_jax_kernel(lambda outs: lambda x: x)
x = jnp.array([1.0, -1.0], jnp.float32)
try:
    jax.block_until_ready(checked(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)))
    raise AssertionError("the kernel should have raised")
except Exception as e:  # XLA's run-time error (JaxRuntimeError)
    message = str(e)
assert "negative input" in message
assert "kernel 'tutorial_checked', backend 'numba' on cpu" in message
assert re.search(r"set_default\('cpu', 'jax'\)", message)  # the exact call that switches

# --- 7. Every transform at once: check_kernel ------------------------------------
# One call checks what the steps above checked by hand, and more: eager vs jit vs
# a reference, every backend against the default, vmap against a loop (the batch
# axis first and last, batched and unbatched inputs, nested), the JVP against
# finite differences in float64, the transpose against the JVP, grad and second
# order, compile counts, 8 threads, bad inputs. In a test it raises one
# AssertionError listing every failure (Tutorial 8 shows one).
small = sp.random(6, 5, density=0.4, format="csr", dtype=np.float32, random_state=3)
report = check_kernel(
    spmv,  # through its call function, matvec, with the keywords in kwargs
    small.data,
    small.indices.astype(np.int32),
    small.indptr.astype(np.int32),
    np.linspace(-1.0, 1.0, 5, dtype=np.float32),
    kwargs={"shape": small.shape},
    reference=lambda d, i, p, v: sp.csr_matrix((d, i, p), shape=(6, 5)) @ v,
    skip={"export": "this file runs as __main__, which a fresh process cannot import"},
)
print(report)
assert report.ok and any(row.check.startswith("autodiff: transpose") for row in report.passed)

print("all steps passed")
