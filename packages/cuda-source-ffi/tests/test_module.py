"""load_cuda_inline kernels under jit and vmap on the GPU emulated on the CPU:
the real NVRTC compile for sm_90, the declared layout checked against the
compiled entry, the real native handler called by XLA; each launch runs a
NumPy stand-in of the kernel on the pointers and scalars the handler packed."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cuda_source_ffi import load_cuda_file, load_cuda_inline
from cuda_source_ffi._nvrtc import _library
from ffi_core.cuda import _op as op_module
from ffi_core.cuda import cuda_launch_p
from ffi_core.cuda.testing import EmulatedGPU, emulate

try:
    _library()
except ImportError as exc:  # pragma: no cover - NVRTC is in the workspace
    pytest.skip(str(exc), allow_module_level=True)

S = jax.ShapeDtypeStruct
AXPY = """
extern "C" __global__ void axpy(const float* x, const float* y, float* out, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"""
LOWERING = (cuda_launch_p, op_module._lowering, op_module._cpu_lowering)


def _axpy_stand_in(launch):
    n = int(launch.value(4, "int32"))
    threads = launch.grid[0] * launch.block[0]
    assert threads >= n
    x, y = launch.array(0, np.float32, (n,)), launch.array(1, np.float32, (n,))
    out = launch.array(2, np.float32, (n,))
    out[:] = launch.value(3, "float32") * x + y


_GPU = EmulatedGPU()  # one per process (see EmulatedGPU)
_GPU.define("axpy", (8, 8, 8, 4, 4), _axpy_stand_in)


@pytest.fixture
def gpu():
    with emulate(_GPU, [LOWERING]) as emulated:
        yield emulated


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_axpy_under_jit_and_vmap(gpu):
    module = load_cuda_inline(AXPY, kernels={"axpy": ["in", "in", "out", "a:float32", "n:int32"]})
    n = 1000
    op = module.kernel("axpy", S((n,), jnp.float32), launch_dims=n)
    x, y = _rand(n), _rand(n, seed=1)
    for a in (0.5, -2.0):
        out = jax.jit(lambda u, v, a=a: op(u, v, a=a, n=n))(x, y)
        np.testing.assert_allclose(out, a * x + y, rtol=1e-6)
    assert gpu.launches[-1][:2] == ((4, 1, 1), (256, 1, 1))
    xs = _rand(3, n, seed=2)
    out = jax.vmap(lambda u: op(u, y, a=1.5, n=n))(xs)
    np.testing.assert_allclose(out, 1.5 * xs + y, rtol=1e-6)


def test_load_cuda_file(gpu, tmp_path):
    path = tmp_path / "axpy.cu"
    path.write_text(AXPY)
    module = load_cuda_file(path, kernels={"axpy": ["in", "in", "out", "a:float32", "n:int32"]})
    assert module.name == "axpy.cu"
    op = module.kernel("axpy", S((8,), jnp.float32), grid=1, block=8)
    x = _rand(8)
    np.testing.assert_allclose(op(x, x, a=1.0, n=8), 2 * x, rtol=1e-6)


def test_declared_layout_checked_against_the_compiled_entry(gpu):
    # Declared with n as int64: 8 bytes where the compiled entry has 4.
    module = load_cuda_inline(AXPY, kernels={"axpy": ["in", "in", "out", "a:float32", "n:int64"]})
    op = module.kernel("axpy", S((8,), jnp.float32), grid=1, block=8)
    with pytest.raises(
        TypeError,
        match=re.escape(
            "CUDA kernel 'axpy' of 'inline.cu' is declared with parameters (in, in, out, "
            "a:float32, n:int64) of sizes (8, 8, 8, 4, 8) bytes, but its compiled entry takes "
            "5 parameters of sizes (8, 8, 8, 4, 4)"
        ),
    ):
        op(_rand(8), _rand(8), a=1.0, n=8)


def _message(exc_type, text):
    return pytest.raises(exc_type, match="^" + re.escape(text) + "$")


def test_errors():
    good = {"axpy": ["in", "in", "out", "a:float32", "n:int32"]}
    with _message(TypeError, "`source` must be a str of CUDA C++, got bytes"):
        load_cuda_inline(b"x", kernels=good)
    with _message(
        ValueError,
        "parameter 'n:complex64' of kernel 'axpy' must be 'in', 'out' or 'name:dtype' with "
        "dtype one of bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, "
        "float16, float32, float64",
    ):
        load_cuda_inline(AXPY, kernels={"axpy": ["in", "n:complex64"]})
    module = load_cuda_inline(AXPY, kernels=good)
    with _message(
        KeyError,
        "\"'scale' is not a kernel declared in `kernels` of 'inline.cu'; declared: ['axpy']\"",
    ):
        module.kernel("scale", S((8,), jnp.float32), grid=1, block=8)
    with _message(
        ValueError,
        "CUDA kernel 'axpy' of 'inline.cu' declares 1 output pointers ('out'), but `outs` has 2",
    ):
        module.kernel("axpy", [S((8,), jnp.float32)] * 2, grid=1, block=8)
    with _message(TypeError, "`grid` must be an int or a tuple of 1 to 3 ints, got <class 'str'>"):
        module.kernel("axpy", S((8,), jnp.float32), grid="x", block=8)
    op = module.kernel("axpy", S((8,), jnp.float32), grid=1, block=8)
    x = _rand(8)
    with _message(
        TypeError, "CUDA kernel 'axpy' of 'inline.cu' takes 2 inputs (its 'in' parameters), got 1"
    ):
        op(x, a=1.0, n=8)
    with _message(
        TypeError,
        "CUDA kernel 'axpy' of 'inline.cu' takes the scalar keywords ['a', 'n']; missing ['n']",
    ):
        op(x, x, a=1.0)
    with _message(
        TypeError,
        "CUDA kernel 'axpy' of 'inline.cu': scalar 'a' must be a number (declared float32), "
        "got str",
    ):
        op(x, x, a="1", n=8)


def test_gpu_op_on_a_machine_without_gpu():
    if jax.devices()[0].platform == "gpu":
        pytest.skip("this machine has a GPU")
    module = load_cuda_inline(AXPY, kernels={"axpy": ["in", "in", "out", "a:float32", "n:int32"]})
    op = module.kernel("axpy", S((8,), jnp.float32), grid=1, block=8)
    x = _rand(8)
    with _message(
        RuntimeError,
        "CUDA kernel 'axpy' of 'inline.cu' runs on NVIDIA GPUs, but JAX has no CUDA device "
        'here; install a CUDA build of JAX (`uv add "jax[cuda13]"`) on a machine with an '
        "NVIDIA GPU and driver",
    ):
        op(x, x, a=1.0, n=8)
