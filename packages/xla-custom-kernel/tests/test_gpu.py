"""On a GPU: one operation with a numba (cpu) and a numba_cuda (gpu) backend, the
backend picked by where the call runs, under jit, vmap, grad and a backend switch.

Skipped with a reason where numba-cuda-ffi is not installed or JAX has no GPU.
"""

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
import xla_custom_kernel as xck

numba_cuda_ffi = pytest.importorskip("numba_cuda_ffi", reason="needs xla-custom-kernel[numba-cuda]")


def _gpus():
    try:
        return jax.devices("cuda")
    except RuntimeError:
        return []


pytestmark = pytest.mark.skipif(not _gpus(), reason="needs an NVIDIA GPU visible to JAX")


@numba.njit
def _scale_cpu(x, out):
    for i in range(x.size):
        out[i] = 3 * x[i]


def _scale_gpu_kernel():
    from numba import cuda

    @cuda.jit
    def scale_gpu(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = 3 * x[i]

    return scale_gpu


def _make(name):
    op = xck.XLACustomKernel(name)
    op.def_numba_kernel(lambda outs: _scale_cpu)
    gpu_kernel = _scale_gpu_kernel()
    op.def_numba_cuda_kernel(
        lambda outs: numba_cuda_ffi.numba_cuda_kernel(gpu_kernel, outs, launch_dims=outs.shape[0])
    )
    op.def_jax_kernel(lambda outs: lambda x: 3 * x)
    op.def_jvp_rule2(lambda t, x, outs: op(t, outs=outs))
    op.def_transpose_rule(lambda cts, x, outs: [op(cts[0], outs=outs)])
    return op


def test_gpu_backend_under_jit_vmap_and_grad(name):
    op = _make(name)
    call = lambda x: op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))  # noqa: E731
    gpu = _gpus()[0]
    x = jax.device_put(jnp.arange(1000, dtype=jnp.float32), gpu)
    assert op.get_default("gpu") == "numba_cuda"
    np.testing.assert_allclose(jax.jit(call)(x), 3 * np.arange(1000))
    xs = jax.device_put(jnp.arange(4 * 300, dtype=jnp.float32).reshape(4, 300), gpu)
    np.testing.assert_allclose(jax.jit(jax.vmap(call))(xs), 3 * np.asarray(xs))
    np.testing.assert_allclose(jax.jit(jax.grad(lambda x: call(x).sum()))(x), np.full(1000, 3.0))
    hlo = jax.jit(call).lower(x).as_text()
    assert "numba_cuda." in hlo


def test_cpu_and_gpu_backends_agree_and_switch(name):
    op = _make(name)
    call = lambda x, **kw: op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), **kw)  # noqa: E731
    host = np.linspace(-1, 1, 513, dtype=np.float32)
    on_gpu = jax.jit(call)(jax.device_put(host, _gpus()[0]))
    on_cpu = jax.jit(call)(jax.device_put(host, jax.devices("cpu")[0]))
    np.testing.assert_array_equal(np.asarray(on_gpu), np.asarray(on_cpu))
    x = jax.device_put(host, _gpus()[0])
    assert "numba_cuda." not in jax.jit(lambda x: call(x, backend="jax")).lower(x).as_text()
    np.testing.assert_allclose(call(x, backend="jax"), 3 * host)
