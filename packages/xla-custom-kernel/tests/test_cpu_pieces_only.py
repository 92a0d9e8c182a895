"""Every seed backend registered where only the CPU pieces are installed.

An operator library registers a backend for every platform when it is
imported (numba, jax and pallas beside numba_cuda, warp, triton and cuda_raw),
and a user installs only the bridges they run. This module registers all seven
at import, runs the CPU backends under jit, vmap and grad, and asks for each
GPU bridge's backend, which only then raises the ImportError naming its extra.

CI runs it in an environment holding only ffi-core, numba-cpu-ffi and
xla-custom-kernel, with ``XLA_CUSTOM_KERNEL_CPU_ONLY=1``: the GPU bridges must
then really be absent. Elsewhere they are made to look absent.
"""

import importlib.util
import os
import re

import jax
import jax.numpy as jnp
import numba
import pytest
import xla_custom_kernel as xck
from xla_custom_kernel import _adapters

#: backend: (its bridge package, the extra of xla-custom-kernel that brings it)
GPU_BRIDGES = {
    "numba_cuda": ("numba_cuda_ffi", "numba-cuda"),
    "warp": ("warp_ffi", "warp"),
    "triton": ("triton_ffi", "triton"),
    "cuda_raw": ("cuda_source_ffi", "cuda-raw"),
}


@numba.njit
def _scale_numba(x, out):
    for i in range(x.size):
        out[i] = x[i] * 2.0


def _never(backend):
    def kg(**kwargs):
        raise AssertionError(f"the {backend} generator ran on the CPU")

    return kg


# What an operator library does at import: every seed backend, registered
# whether or not its bridge is installed.
scale = xck.XLACustomKernel("cpu_pieces_only_scale")
scale.def_numba_kernel(lambda outs: _scale_numba)
scale.def_numba_cuda_kernel(_never("numba_cuda"))
scale.def_warp_kernel(_never("warp"))
scale.def_triton_kernel(_never("triton"))
scale.def_cuda_raw_kernel(_never("cuda_raw"))
scale.def_pallas_kernel("gpu", _never("pallas"))
scale.def_jax_kernel(lambda outs: lambda x: x * 2.0)
scale.def_jvp_rule2(lambda t, x, outs, **kw: scale(t, outs=outs, **kw))
scale.def_transpose_rule(lambda cts, x, outs, **kw: [scale(cts[0], outs=outs, **kw)])


@pytest.fixture(autouse=True)
def _gpu_bridges_absent(monkeypatch):
    if os.environ.get("XLA_CUSTOM_KERNEL_CPU_ONLY") == "1":
        present = [m for m, _ in GPU_BRIDGES.values() if importlib.util.find_spec(m)]
        assert not present, f"this environment must not hold {present}"
        return
    installed = _adapters._installed
    gpu = {m for m, _ in GPU_BRIDGES.values()}
    monkeypatch.setattr(_adapters, "_installed", lambda m: m not in gpu and installed(m))


def _call(x, backend=None):
    return scale(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), backend=backend)


@pytest.mark.parametrize("backend", [None, "numba", "jax"])
def test_the_cpu_backends_run_under_jit_vmap_and_grad(backend):
    x = jnp.arange(4.0)
    assert jnp.array_equal(jax.jit(_call, static_argnums=1)(x, backend), 2 * x)
    xs = jnp.arange(12.0).reshape(3, 4)
    assert jnp.array_equal(jax.vmap(lambda x: _call(x, backend))(xs), 2 * xs)
    grad = jax.grad(lambda x: _call(x, backend).sum())(x)
    assert jnp.array_equal(grad, jnp.full(4, 2.0))


def test_the_registrations_are_all_there_and_say_what_is_missing():
    assert {p: list(e) for p, e in scale._kernels.items()} == {
        "cpu": ["numba", "warp", "jax"],
        "gpu": ["numba_cuda", "warp", "triton", "cuda_raw", "pallas", "jax"],
        "tpu": ["jax"],
    }
    assert scale.available_backends("cpu") == ["numba", "jax"]
    assert scale.available_backends("gpu") == ["pallas", "jax"]
    assert list(scale.unavailable_backends("gpu")) == ["numba_cuda", "warp", "triton", "cuda_raw"]
    assert scale.unavailable_backends("cpu") == {
        "warp": 'warp-ffi is not installed; install it with `pip install "xla-custom-kernel[warp]"` (from wheels built from the repository: `pip install --find-links DIR "xla-custom-kernel[warp]"`; in a uv project: `uv add "xla-custom-kernel[warp]"`)'
    }
    assert scale.defaults == {"cpu": "numba", "gpu": "pallas", "tpu": "jax"}
    assert repr(scale) == (
        "XLACustomKernel('cpu_pieces_only_scale'; cpu: numba, warp (unavailable: warp-ffi is not "
        "installed), jax; gpu: numba_cuda (unavailable: numba-cuda-ffi is not installed), warp "
        "(unavailable: warp-ffi is not installed), triton (unavailable: triton-ffi is not "
        "installed), cuda_raw (unavailable: cuda-source-ffi is not installed), pallas, jax; "
        "tpu: jax)"
    )


@pytest.mark.parametrize("backend", GPU_BRIDGES)
def test_asking_for_a_gpu_bridge_raises_the_extras_import_error(backend):
    module, extra = GPU_BRIDGES[backend]
    message = (
        f"backend {backend!r} of kernel 'cpu_pieces_only_scale' (chosen for the call) needs "
        f"{module.replace('_', '-')}, which is not installed; install it with `pip install "
        f'"xla-custom-kernel[{extra}]"` (from wheels built from the repository: '
        f'`pip install --find-links DIR "xla-custom-kernel[{extra}]"`; in a uv project: `uv add "xla-custom-kernel[{extra}]"`)'
    )
    x = jnp.arange(4.0)
    with pytest.raises(ImportError, match=f"^{re.escape(message)}$"):
        _call(x, backend)
    # Under jit, JAX adds its traceback note after the message.
    with pytest.raises(ImportError, match=f"^{re.escape(message)}"):
        jax.jit(_call, static_argnums=1)(x, backend)
