"""The GPU path: Warp's CUDA build launched by ffi-core's native launcher.

Without a GPU, everything up to the driver is real (Warp compiles the kernel
for the emulated device's architecture, the launcher's handler is generated,
registered and called by XLA); each launch then runs Warp's CPU build of the
kernel on the structs the handler packed (``warp_ffi.testing``). The parameter
layout is also checked byte for byte against the PTX Warp generates.
"""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import warp as wp
from ffi_core.bridge.cuda import ptx_params
from ffi_core.bridge.cuda.testing import EMULATED_STREAM, EmulatedGPU, emulated_gpu_fixture
from jax.test_util import check_grads
from warp_ffi import KernelCompileError, _gpu, warp_kernel
from warp_ffi._catalog import kernel_info
from warp_ffi.testing import LOWERING, on_cpu

S = jax.ShapeDtypeStruct
f64 = wp.float64


@wp.kernel
def axpy(
    x: wp.array(dtype=float), y: wp.array(dtype=float), alpha: float, out: wp.array(dtype=float)
):
    i = wp.tid()
    out[i] = alpha * x[i] * x[i] + y[i]


@wp.kernel
def scaled_grid(x: wp.array2d(dtype=f64), scale: wp.int16, out: wp.array2d(dtype=f64)):
    i, j = wp.tid()
    out[i, j] = x[i, j] * f64(float(i + 10 * j)) * f64(float(scale))


@wp.kernel
def mix(
    x: wp.array(dtype=f64),
    y: wp.array(dtype=f64),
    alpha: f64,
    a: wp.array(dtype=f64),
    b: wp.array(dtype=f64),
):
    i = wp.tid()
    a[i] = alpha * x[i] * y[i]
    b[i] = wp.exp(x[i]) - y[i] * y[i]


@wp.kernel
def gather_square(
    index: wp.array(dtype=wp.int32), x: wp.array(dtype=f64), out: wp.array(dtype=f64)
):
    i = wp.tid()
    out[i] = x[index[i]] * x[index[i]]


@wp.kernel
def scatter_add(
    index: wp.array(dtype=wp.int32),
    value: wp.array(dtype=float),
    start: wp.array(dtype=float),
    out: wp.array(dtype=float),
):
    i = wp.tid()
    wp.atomic_add(out, index[i], value[i])


@wp.kernel
def copy_any(x: wp.array(dtype=Any), out: wp.array(dtype=Any)):
    i = wp.tid()
    out[i] = x[i] + x[i]


@wp.kernel
def flags(
    x: wp.array(dtype=wp.float16), on: wp.bool, h: wp.float16, out: wp.array(dtype=wp.float16)
):
    i = wp.tid()
    if on:
        out[i] = x[i] + h
    else:
        out[i] = x[i]


@wp.kernel
def index_4d(x: wp.array4d(dtype=wp.int64), out: wp.array4d(dtype=wp.int64)):
    i, j, k, m = wp.tid()
    out[i, j, k, m] = x[i, j, k, m] + wp.int64(1000 * i + 100 * j + 10 * k + m)


@wp.kernel
def count(start: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    wp.atomic_add(out, i, 1)


@wp.kernel(enable_backward=False)
def no_adjoint(x: wp.array(dtype=f64), out: wp.array(dtype=f64)):
    i = wp.tid()
    out[i] = x[i] * f64(2.0)


# One per process: a registered target keeps the handler built against the
# emulated driver it was first lowered with.
_GPU = on_cpu(EmulatedGPU(compute_capability=(9, 0)))


gpu = emulated_gpu_fixture(_GPU, [LOWERING])


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


def _rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ------------------------------------------------------ the layout, vs Warp's PTX


@pytest.mark.parametrize(
    ("kernel", "dtypes"),
    [
        (axpy, ("float32", "float32", "float32")),
        (scaled_grid, ("float64", "float64")),
        (mix, ("float64",) * 4),
        (copy_any, ("int16", "int16")),
        (flags, ("float16", "float16")),
        (index_4d, ("int64", "int64")),
    ],
    ids=lambda v: getattr(v, "key", None) or "-".join(v),
)
@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_layout_matches_the_ptx(kernel, dtypes, backward):
    info = kernel_info(kernel)
    image = _gpu.compile_gpu(info, dtypes, (8, 0), use_ptx=True)
    assert image.ptx and image.data.endswith(b"\0")
    entry = image.backward if backward else image.forward
    n = len(info.arrays)
    adjoint = list(range(n, 2 * n)) if backward else None
    grid = (7, 3, 5, 2)[: info.specialized(dtypes).adj.kernel_dim]
    layout = _gpu.gpu_layout(info, dtypes, grid, 1, list(range(n)), adjoint)
    assert layout.param_sizes == tuple(ptx_params(image.data[:-1].decode(), entry))


@pytest.mark.parametrize("capability", [(8, 0), (9, 0)])
def test_cubin_per_architecture_once(capability):
    info = kernel_info(axpy)
    image = _gpu.compile_gpu(info, ("float32",) * 3, capability)
    assert not image.ptx and image.data[:4] == b"\x7fELF"
    assert image.forward.endswith("_cuda_kernel_forward") and image.forward.encode() in image.data
    assert _gpu.compile_gpu(info, ("float32",) * 3, capability) is image


# ------------------------------------------------------------- the emulated GPU


@pytest.mark.parametrize("n", [1, 256, 1000])
def test_axpy_under_jit(gpu, n):
    op = warp_kernel(axpy, S((n,), jnp.float32))
    x, y = _rand(n), _rand(n, seed=1)
    out = jax.jit(lambda a, b: op(a, b, alpha=0.5))(x, y)
    np.testing.assert_allclose(out, 0.5 * x * x + y, rtol=1e-6)
    grid, block, shared, stream = gpu.launches[-1]
    assert grid == (-(-n // 256), 1, 1) and block == (256, 1, 1)
    assert shared == 0 and stream == EMULATED_STREAM


def test_scalars_are_attributes_of_one_handler(gpu):
    op = warp_kernel(axpy, S((40,), jnp.float32))
    x, y = _rand(40), _rand(40, seed=1)
    made = []
    for alpha in (0.5, -2.0, 3.25):
        np.testing.assert_allclose(op(x, y, alpha=alpha), alpha * x * x + y, rtol=1e-6)
        made.append((len(gpu.handlers), len(gpu.loaded)))
    assert made[0] == made[-1]  # alpha travels as an attribute: no new handler or load


def test_two_dimensional_grid_and_int16_scalar(gpu, x64):
    op = warp_kernel(scaled_grid, S((3, 4), jnp.float64))
    x = _rand(3, 4, dtype=np.float64)
    expected = x * (np.arange(3)[:, None] + 10 * np.arange(4)[None]) * -3
    np.testing.assert_allclose(jax.jit(lambda a: op(a, scale=-3))(x), expected, rtol=1e-12)


def test_four_dimensional_grid(gpu, x64):
    op = warp_kernel(index_4d, S((2, 3, 4, 5), jnp.int64))
    x = np.arange(120, dtype=np.int64).reshape(2, 3, 4, 5)
    i, j, k, m = np.indices(x.shape)
    np.testing.assert_array_equal(jax.jit(op)(x), x + 1000 * i + 100 * j + 10 * k + m)
    assert gpu.launches[-1][0] == (1, 1, 1)  # 120 threads, one block


def test_launch_dims_given_and_folded(gpu):
    out = jnp.zeros(4, jnp.int32)
    twice = warp_kernel(count, S((4,), jnp.int32), launch_dims=(4, 2), input_output_aliases={0: 0})
    np.testing.assert_array_equal(twice(out), [2, 2, 2, 2])  # 8 threads, 2 per coordinate
    derived = warp_kernel(
        count, S((4,), jnp.int32), launch_dims=lambda s: (s[0] - 1,), input_output_aliases={0: 0}
    )
    np.testing.assert_array_equal(jax.jit(derived)(out), [1, 1, 1, 0])


def test_generic_kernel_per_dtype(gpu, x64):
    op64 = warp_kernel(copy_any, S((6,), jnp.float64))
    op32 = warp_kernel(copy_any, S((6,), jnp.int32))
    a, b = np.arange(6.0), np.arange(6, dtype=np.int32)
    np.testing.assert_array_equal(op64(a), 2 * a)
    np.testing.assert_array_equal(op32(b), 2 * b)


def test_bool_and_float16_scalars(gpu):
    op = warp_kernel(flags, S((5,), jnp.float16))
    x = np.arange(5, dtype=np.float16)
    np.testing.assert_array_equal(op(x, on=True, h=np.float16(0.5)), x + np.float16(0.5))
    np.testing.assert_array_equal(op(x, on=False, h=np.float16(0.5)), x)


def test_aliased_accumulation(gpu):
    op = warp_kernel(scatter_add, S((3,), jnp.float32), launch_dims=5, input_output_aliases={2: 0})
    index = np.array([0, 2, 2, 1, 0], np.int32)
    value = np.arange(1.0, 6.0, dtype=np.float32)
    start = np.array([10.0, 20.0, 30.0], np.float32)
    np.testing.assert_allclose(jax.jit(op)(index, value, start), [16.0, 24.0, 35.0])


def test_empty_output_launches_nothing(gpu):
    op = warp_kernel(axpy, S((0,), jnp.float32))
    out = op(np.zeros(0, np.float32), np.zeros(0, np.float32), alpha=1.0)
    assert out.shape == (0,) and gpu.launches == []


def test_vmap_one_call_launching_per_row(gpu):
    op = warp_kernel(axpy, S((8,), jnp.float32))
    x, y = _rand(3, 8), _rand(8, seed=1)
    out = jax.vmap(lambda a: op(a, y, alpha=2.0))(x)
    np.testing.assert_allclose(out, 2 * x * x + y, rtol=1e-6)
    assert len(gpu.launches) == 3


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled"])
def test_vmap_methods(gpu, method):
    op = warp_kernel(axpy, S((8,), jnp.float32), vmap_method=method)
    x, y = _rand(3, 8), _rand(3, 8, seed=1)
    np.testing.assert_allclose(
        jax.vmap(lambda a, b: op(a, b, alpha=1.0))(x, y), x * x + y, rtol=1e-6
    )


def test_scan(gpu):
    op = warp_kernel(axpy, S((6,), jnp.float32))
    y = _rand(6, seed=1)

    def step(carry, _):
        return op(carry, y, alpha=0.25), None

    out, _ = jax.lax.scan(step, jnp.zeros(6, jnp.float32), None, length=3)
    expected = np.zeros(6, np.float32)
    for _ in range(3):
        expected = 0.25 * expected * expected + y
    np.testing.assert_allclose(out, expected, rtol=1e-6)


# ------------------------------------------------------------------ gradients


def test_grad_against_reference(gpu, x64):
    op = warp_kernel(mix, (S((7,), jnp.float64), S((7,), jnp.float64)))
    x, y = _rand(7, dtype=np.float64), _rand(7, dtype=np.float64, seed=1)

    def loss(x, y):
        a, b = op(x, y, alpha=1.5)
        return jnp.sum(a * jnp.cos(b))

    def reference(x, y):
        return jnp.sum(1.5 * x * y * jnp.cos(jnp.exp(x) - y * y))

    for got, want in zip(
        jax.grad(loss, (0, 1))(x, y), jax.grad(reference, (0, 1))(x, y), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-10)
    check_grads(lambda x, y: op(x, y, alpha=1.5), (x, y), order=1, modes=["rev"])
    # The gradients start from zeros each call (aliased zero inputs), not from stale memory.
    np.testing.assert_allclose(jax.jit(jax.grad(loss))(x, y), jax.grad(reference)(x, y), rtol=1e-10)


def test_grad_with_integer_input_and_vmap(gpu, x64):
    op = warp_kernel(gather_square, S((4,), jnp.float64))
    index = np.array([0, 2, 2, 1], np.int32)
    x = _rand(3, dtype=np.float64)
    grad = jax.grad(lambda x: op(index, x).sum())(x)
    np.testing.assert_allclose(grad, [2 * x[0], 2 * x[1], 4 * x[2]], rtol=1e-12)
    xs = _rand(5, 3, dtype=np.float64, seed=2)
    batched = jax.vmap(jax.grad(lambda x: op(index, x).sum()))(xs)
    np.testing.assert_allclose(batched, xs * np.array([2.0, 2.0, 4.0]), rtol=1e-12)


def test_no_adjoint(gpu, x64):
    op = warp_kernel(no_adjoint, S((3,), jnp.float64))
    with pytest.raises(
        NotImplementedError,
        match="^"
        + re.escape(
            "warp kernel 'no_adjoint' has no adjoint: its module or kernel was compiled with "
            "enable_backward=False; set it to True (wp.set_module_options or "
            "@wp.kernel(enable_backward=True)) to differentiate through it"
        ),
    ):
        jax.grad(lambda x: op(x).sum())(np.ones(3))


@wp.kernel(module="unique")
def broken(x: wp.array(dtype=f64), out: wp.array(dtype=f64)):
    i = wp.tid()
    out[i] = x[i] * 2.0  # float64 times a float32 literal: Warp refuses it


def test_kernel_that_does_not_compile_names_the_gpu(gpu, x64):
    # The CPU's message names only the dtypes (test_errors.py).
    f = warp_kernel(broken, S((2,), jnp.float64))
    with pytest.raises(KernelCompileError) as info:
        jax.jit(f)(jnp.ones(2, jnp.float64))
    message = str(info.value)
    assert message.startswith(
        "warp kernel 'broken' does not compile for a GPU of compute capability 9.0 with arrays "
        'of (float64, float64): RuntimeError: Error while parsing function "broken"'
    ), message
    assert "Input types must be the same, got ['float64', 'float32']" in message


@wp.kernel
def shifted(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = x[i]


_UNCHECKED = (
    "warp kernel 'shifted' runs on a GPU without bounds checks: `boundscheck` (and "
    "$FFI_CORE_BOUNDSCHECK=1) checks a Warp kernel's indices on the CPU only; check the GPU "
    "kernel with kernel_check.check_kernel(op, ..., sanitize=True) (compute-sanitizer's "
    "memcheck), or put the inputs on the CPU"
)


def test_boundscheck_on_a_gpu_warns_that_the_call_is_unchecked(gpu):
    x = jnp.arange(8, dtype=jnp.float32)
    checked = warp_kernel(shifted, S((8,), jnp.float32), boundscheck=True)
    with pytest.warns(UserWarning, match=f"^{re.escape(_UNCHECKED)}$"):
        np.testing.assert_array_equal(jax.jit(checked)(x), x)
    # Without the option the GPU call says nothing (warnings are errors here).
    plain = warp_kernel(shifted, S((8,), jnp.float32), boundscheck=False)
    np.testing.assert_array_equal(jax.jit(plain)(x + 1), x + 1)
