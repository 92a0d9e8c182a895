"""XLACustomKernel.def_warp_kernel with bare Warp kernels: wrapped with
warp_ffi.warp_kernel, static keywords reaching scalar parameters, beside a
numba backend of the same operation."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest

wp = pytest.importorskip("warp")
pytest.importorskip("warp_ffi")
import xla_custom_kernel as xck  # noqa: E402

S = jax.ShapeDtypeStruct


@wp.kernel
def scale_shift(
    x: wp.array(dtype=wp.float32), scale: float, shift: float, out: wp.array(dtype=wp.float32)
):
    i = wp.tid()
    out[i] = scale * x[i] + shift


@wp.kernel
def head(x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = x[i] * 10.0


def _numba_scale_shift(outs, scale, shift):
    @numba.njit
    def kernel(x, out):
        for i in range(x.size):
            out[i] = scale * x[i] + shift

    return kernel


@pytest.fixture
def op(request):
    k = xck.XLACustomKernel(re.sub(r"\W", "_", f"warp_backend_{request.node.name}"))
    k.def_numba_kernel(_numba_scale_shift)
    k.def_warp_kernel(lambda outs, scale, shift: scale_shift)
    return k


def test_bare_kernel_with_static_scalars(op):
    x = jnp.arange(6.0, dtype=jnp.float32)
    out = S(x.shape, x.dtype)
    for backend in ("numba", "warp"):
        got = jax.jit(lambda x, b=backend: op(x, outs=out, scale=2.0, shift=-1.0, backend=b))(x)
        np.testing.assert_allclose(got, 2 * np.asarray(x) - 1)
    xs = jnp.stack([x, x + 1])
    np.testing.assert_allclose(
        jax.vmap(lambda r: op(r, outs=out, scale=0.5, shift=0.0, backend="warp"))(xs),
        0.5 * np.asarray(xs),
    )


def test_kernel_with_launch_dims():
    k = xck.XLACustomKernel("warp_backend_launch_dims")
    k.def_warp_kernel(lambda outs: (head, (2,)))
    x = jnp.arange(4.0, dtype=jnp.float32)
    start = k(x, outs=S((4,), jnp.float32))
    np.testing.assert_array_equal(np.asarray(start)[:2], [0.0, 10.0])  # only 2 threads ran


def test_a_missing_scalar_names_the_kernel_and_the_backend():
    k = xck.XLACustomKernel("warp_backend_missing_scalar")
    k.def_warp_kernel(lambda outs, scale: scale_shift)  # `shift` is not a static keyword
    x = jnp.ones(3, jnp.float32)
    with pytest.raises(xck.BackendError) as info:
        k(x, outs=S(x.shape, x.dtype), scale=1.0)
    assert (
        "backend 'warp' of kernel 'warp_backend_missing_scalar' failed on platform 'cpu': "
        "TypeError: warp kernel 'scale_shift' needs its scalar parameter 'shift' (float32) as "
        "a keyword argument, e.g. op(..., shift=...)"
    ) in str(info.value)
