"""Tutorial 6: NVIDIA Warp kernels as JAX operations.

Run it: ``uv run python docs/warp_kernels.py``. Every step asserts its result,
so this file doubles as a test (CI runs it).

A Warp kernel is a ``@wp.kernel`` function whose ``wp.array`` parameters are
the inputs then the outputs; its scalar parameters (``float``, ``int``,
``wp.float32``, ...) may sit anywhere and are given as keyword arguments of
the call. ``warp_kernel`` turns it into a function on JAX arrays. XLA calls a
native handler that fills Warp's argument structs from the call frame and
calls the kernel's compiled CPU entry point: no Python per call. On an NVIDIA
GPU the same op launches Warp's CUDA build of the kernel through the project's
native CUDA launcher (tutorial 7, ``docs/gpu_kernels.py``, shows it).
"""

from typing import Any

import jax
import jax.numpy as jnp
import numba
import numpy as np
import warp as wp
import xla_custom_kernel as xck
from jax.test_util import check_grads
from warp_ffi import warp_kernel
from xla_custom_kernel.testing import check_kernel

# Warp logs a banner and a line per module it builds; keep it to warnings.
wp.config.log_level = wp.LOG_WARNING
S = jax.ShapeDtypeStruct

# --- 1. A first kernel: elementwise, with a scalar parameter ----------------


@wp.kernel
def axpy(
    x: wp.array(dtype=float), y: wp.array(dtype=float), alpha: float, out: wp.array(dtype=float)
):
    i = wp.tid()
    out[i] = alpha * x[i] + y[i]


x = jnp.linspace(0.0, 1.0, 5, dtype=jnp.float32)
y = jnp.ones(5, jnp.float32)
axpy_op = warp_kernel(axpy, S(x.shape, x.dtype))  # the grid: the first output's shape
np.testing.assert_allclose(axpy_op(x, y, alpha=2.0), 2 * x + y)  # eagerly
# Under jit: the scalar is an attribute of the call, so another value is not
# another compile of the kernel.
np.testing.assert_allclose(jax.jit(lambda x, y: axpy_op(x, y, alpha=-1.0))(x, y), y - x)

# --- 2. A 2-d launch and a generic kernel -------------------------------------


@wp.kernel
def transpose(a: wp.array(dtype=Any, ndim=2), out: wp.array(dtype=Any, ndim=2)):
    i, j = wp.tid()  # the grid below is a's shape
    out[j, i] = a[i, j]


a = jnp.arange(6, dtype=jnp.int32).reshape(2, 3)
t = warp_kernel(transpose, S((3, 2), a.dtype), launch_dims=lambda a_shape: a_shape)
np.testing.assert_array_equal(jax.jit(t)(a), np.asarray(a).T)
# wp.array(dtype=Any) is specialized per dtype, once:
b = a.astype(jnp.float32)
np.testing.assert_array_equal(
    warp_kernel(transpose, S((3, 2), b.dtype), launch_dims=(2, 3))(b), b.T
)

# --- 3. vmap: one native call over the batch ------------------------------------


@wp.kernel
def cumsum(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    total = float(0.0)  # noqa: UP018 - float(...) makes a variable Warp may change in a loop
    for j in range(i + 1):
        total += x[j]
    out[i] = total


rows = jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4)
cumsum_op = warp_kernel(cumsum, S((4,), jnp.float32))
# Each row is launched with the unbatched grid on its own slices, so a kernel
# written for one row (here each thread reads the row's start) stays right.
np.testing.assert_array_equal(jax.jit(jax.vmap(cumsum_op))(rows), np.cumsum(rows, axis=1))

# --- 4. grad through Warp's adjoint kernel ------------------------------------------

with jax.enable_x64(True) if hasattr(jax, "enable_x64") else jax.experimental.enable_x64():

    @wp.kernel
    def wave(x: wp.array(dtype=wp.float64), k: wp.float64, out: wp.array(dtype=wp.float64)):
        i = wp.tid()
        out[i] = wp.sin(k * x[i]) * x[i]

    xs = jnp.linspace(-2.0, 2.0, 9)
    wave_op = warp_kernel(wave, S(xs.shape, xs.dtype))
    # jax.grad runs Warp's generated adjoint kernel, natively, as a second call.
    g = jax.grad(lambda x: wave_op(x, k=3.0).sum())(xs)
    np.testing.assert_allclose(g, 3 * jnp.cos(3 * xs) * xs + jnp.sin(3 * xs), rtol=1e-12)
    check_grads(lambda x: wave_op(x, k=3.0), (xs,), order=1, modes=["rev"])
    # Scalars are static: they get no gradient. A kernel compiled with
    # enable_backward=False, or called with input_output_aliases, raises
    # NotImplementedError when differentiated. Forward mode (jax.jvp) is not
    # available: the rule is a VJP.

# --- 5. One operation, numba and warp backends ---------------------------------------

scale_op = xck.XLACustomKernel("tutorial_scale_add")


def numba_scale(outs, alpha):
    @numba.njit
    def kernel(x, y, out):
        for i in range(x.size):
            out[i] = alpha * x[i] + y[i]

    return kernel


scale_op.def_numba_kernel(numba_scale)
# The generator may return the bare @wp.kernel: it is wrapped with warp_kernel,
# and the call's static keyword `alpha` reaches the kernel's scalar parameter.
scale_op.def_warp_kernel(lambda outs, alpha: axpy)
out = S(x.shape, x.dtype)
by_warp = scale_op(x, y, outs=out, alpha=0.5, backend="warp")
assert scale_op.available_backends("cpu") == ["numba", "warp"]
# check_kernel compares every backend with the default (numba) under jit and
# vmap, and checks the default eagerly and from 8 threads too (Tutorial 8 shows
# all it checks).
report = check_kernel(
    scale_op,
    x,
    y,
    kwargs={"outs": out, "alpha": 0.5},
    checks=["results", "backends", "vmap", "compile", "threads"],
)
assert report.ok and [r.check for r in report.passed if r.family == "backends"] == [
    "backends: backend 'warp'"
]

# --- 6. A sparse, event-driven example: spikes through a CSR weight matrix ---------


@wp.kernel
def spikes_to_current(
    spikes: wp.array(dtype=wp.bool),
    indptr: wp.array(dtype=wp.int32),
    indices: wp.array(dtype=wp.int32),
    weights: wp.array(dtype=wp.float32),
    start: wp.array(dtype=wp.float32),
    current: wp.array(dtype=wp.float32),
):
    pre = wp.tid()  # one thread per presynaptic neuron; only spiking ones work
    if spikes[pre]:
        for k in range(indptr[pre], indptr[pre + 1]):
            wp.atomic_add(current, indices[k], weights[k])


rng = np.random.default_rng(0)
n_pre, n_post = 50, 20
dense = (rng.random((n_pre, n_post)) < 0.2) * rng.normal(size=(n_pre, n_post))
indptr = np.concatenate([[0], np.cumsum((dense != 0).sum(1))]).astype(np.int32)
indices = np.nonzero(dense)[1].astype(np.int32)
weights = dense[dense != 0].astype(np.float32)
spikes = rng.random(n_pre) < 0.3
# Outputs start uninitialized: an accumulating kernel gets its starting values
# as an input aliased to the output.
propagate = warp_kernel(
    spikes_to_current,
    S((n_post,), jnp.float32),
    launch_dims=lambda spikes_shape, *rest: spikes_shape,
    input_output_aliases={4: 0},
)
current = jax.jit(propagate)(spikes, indptr, indices, weights, jnp.zeros(n_post, jnp.float32))
np.testing.assert_allclose(current, spikes @ dense, rtol=1e-5, atol=1e-5)

print("tutorial 6: all steps passed")
