"""warp_kernel end to end on the CPU: elementwise and 2-d launches, scalars,
generic kernels, several outputs, launch grids, eager, jit, scan, threads,
several devices."""

from __future__ import annotations

import gc
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import warp as wp
from ffi_core.testing import device_mesh
from jax.sharding import PartitionSpec as P
from warp_ffi import jaxinfo_to_warpinfo, jaxtype_to_warptype, warp_kernel

S = jax.ShapeDtypeStruct


@wp.kernel
def axpy(
    x: wp.array(dtype=float), y: wp.array(dtype=float), alpha: float, out: wp.array(dtype=float)
):
    i = wp.tid()
    out[i] = alpha * x[i] + y[i]


@wp.kernel
def affine2d(
    a: wp.array(dtype=wp.float32, ndim=2),
    scale: wp.float32,
    shift: wp.int32,
    out: wp.array(dtype=wp.float32, ndim=2),
):
    i, j = wp.tid()
    out[i, j] = a[i, j] * scale + float(shift) + float(i) * 0.0


@wp.kernel
def transpose(a: wp.array(dtype=wp.float64, ndim=2), out: wp.array(dtype=wp.float64, ndim=2)):
    i, j = wp.tid()
    out[j, i] = a[i, j]


@wp.kernel
def double_any(a: wp.array(dtype=Any), out: wp.array(dtype=Any)):
    i = wp.tid()
    out[i] = a[i] + a[i]


@wp.kernel
def split(
    x: wp.array(dtype=wp.float32),
    lo: wp.array(dtype=wp.float32),
    hi: wp.array(dtype=wp.int32),
):
    i = wp.tid()
    lo[i] = wp.floor(x[i])
    hi[i] = int(wp.ceil(x[i]))


@wp.kernel
def scalars(
    x: wp.array(dtype=wp.float64),
    flag: wp.bool,
    big: wp.int64,
    small: wp.uint8,
    half: wp.float16,
    out: wp.array(dtype=wp.float64),
):
    i = wp.tid()
    v = x[i] + wp.float64(big) + wp.float64(small) + wp.float64(half)
    if flag:
        v = -v
    out[i] = v


@wp.kernel
def fill_tid(start: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = i


@wp.kernel
def scatter_add(
    index: wp.array(dtype=wp.int32),
    value: wp.array(dtype=wp.float32),
    start: wp.array(dtype=wp.float32),
    out: wp.array(dtype=wp.float32),
):
    i = wp.tid()
    wp.atomic_add(out, index[i], value[i])


def test_axpy_eager_and_jit():
    x = jnp.arange(10.0, dtype=jnp.float32)
    y = jnp.ones(10, jnp.float32)
    f = warp_kernel(axpy, S(x.shape, x.dtype))
    expected = 2.5 * np.asarray(x) + 1
    np.testing.assert_allclose(f(x, y, alpha=2.5), expected)
    np.testing.assert_allclose(jax.jit(lambda x, y: f(x, y, alpha=2.5))(x, y), expected)
    # another value of the scalar: the same handler, another attribute
    np.testing.assert_allclose(jax.jit(lambda x, y: f(x, y, alpha=-1.0))(x, y), 1 - np.asarray(x))


@pytest.mark.parametrize("n", [0, 1, 7, 1000, 70_000])
def test_sizes_from_the_call_frame(n):
    # One registration serves every shape; 70,000 elements carry the cost hint.
    x = jnp.linspace(-1, 1, n, dtype=jnp.float32)
    f = warp_kernel(axpy, S(x.shape, x.dtype))
    np.testing.assert_allclose(jax.jit(lambda x: f(x, x, alpha=3.0))(x), 4 * np.asarray(x))


def test_2d_launch_and_scalar_types():
    a = jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4)
    f = warp_kernel(affine2d, S(a.shape, a.dtype))
    np.testing.assert_allclose(jax.jit(lambda a: f(a, scale=2.0, shift=-3))(a), 2 * a - 3)
    t = warp_kernel(transpose, S((4, 3), jnp.float64), launch_dims=lambda shape: shape)
    with jax.enable_x64(True) if hasattr(jax, "enable_x64") else jax.experimental.enable_x64():
        a64 = jnp.arange(12.0, dtype=jnp.float64).reshape(3, 4)
        np.testing.assert_array_equal(jax.jit(t)(a64), np.asarray(a64).T)


@pytest.mark.parametrize(
    "dtype",
    [
        "float16",
        "float32",
        "float64",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
    ],
)
def test_generic_kernel_specialized_per_dtype(dtype):
    with jax.enable_x64(True) if hasattr(jax, "enable_x64") else jax.experimental.enable_x64():
        x = jnp.arange(6).astype(dtype)
        f = warp_kernel(double_any, S(x.shape, x.dtype))
        out = jax.jit(f)(x)
        assert out.dtype == x.dtype
        np.testing.assert_array_equal(out, np.asarray(x) + np.asarray(x))


def test_several_outputs_and_pytrees():
    x = jnp.array([0.5, 1.5, -2.25], jnp.float32)
    lo, hi = warp_kernel(split, [S(x.shape, jnp.float32), S(x.shape, jnp.int32)])(x)
    np.testing.assert_array_equal(lo, np.floor(x))
    np.testing.assert_array_equal(hi, np.ceil(x).astype(np.int32))
    # A pytree's leaves in JAX's order (dict keys sorted) are the outputs.
    tree = warp_kernel(split, {"a_lo": S(x.shape, jnp.float32), "b_hi": S(x.shape, jnp.int32)})
    out = jax.jit(tree)(x)
    assert set(out) == {"a_lo", "b_hi"}
    np.testing.assert_array_equal(out["b_hi"], hi)


def test_scalars_of_every_kind():
    with jax.enable_x64(True) if hasattr(jax, "enable_x64") else jax.experimental.enable_x64():
        x = jnp.arange(3.0, dtype=jnp.float64)
        f = warp_kernel(scalars, S(x.shape, x.dtype))
        out = jax.jit(lambda x: f(x, flag=True, big=2**40, small=255, half=0.5))(x)
        np.testing.assert_array_equal(out, -(np.asarray(x) + 2**40 + 255 + 0.5))
        out = f(x, flag=False, big=-1, small=0, half=np.float16(1.5))
        np.testing.assert_array_equal(out, np.asarray(x) + 0.5)


@pytest.mark.parametrize(
    ("launch_dims", "expected"),
    [
        (None, list(range(6))),
        (4, [0, 1, 2, 3, -1, -1]),
        ((2,), [0, 1, -1, -1, -1, -1]),
        ((3, 2), None),  # an extra dimension: threads share a wp.tid(), as in wp.launch
        (lambda shape: shape[0] - 1, [0, 1, 2, 3, 4, -1]),
        (0, [-1] * 6),
    ],
    ids=["default", "int", "tuple", "folded", "callable", "empty"],
)
def test_launch_dims(launch_dims, expected):
    # The output starts as `start` (an aliased input) where the kernel does not
    # write.
    start = jnp.full(6, -1, jnp.int32)
    g = warp_kernel(
        fill_tid, S((6,), jnp.int32), launch_dims=launch_dims, input_output_aliases={0: 0}
    )
    if expected is None:
        expected = [0, 1, 2, -1, -1, -1]
    np.testing.assert_array_equal(jax.jit(g)(start), expected)


def test_accumulating_kernel_with_aliased_start():
    index = jnp.array([0, 2, 2, 1, 0], jnp.int32)
    value = jnp.array([1.0, 2.0, 3.0, 4.0, 5.0], jnp.float32)
    start = jnp.array([10.0, 20.0, 30.0], jnp.float32)
    f = warp_kernel(
        scatter_add,
        S((3,), jnp.float32),
        launch_dims=lambda index_shape, value_shape, start_shape: index_shape,
        input_output_aliases={2: 0},
    )
    np.testing.assert_allclose(jax.jit(f)(index, value, start), [16.0, 24.0, 35.0])


def test_scan():
    f = warp_kernel(axpy, S((5,), jnp.float32))

    def step(carry, _):
        return f(carry, carry, alpha=1.0), carry.sum()

    out, sums = jax.jit(lambda x: jax.lax.scan(step, x, length=4))(jnp.ones(5, jnp.float32))
    np.testing.assert_array_equal(out, np.full(5, 16.0))
    np.testing.assert_array_equal(sums, [5.0, 10.0, 20.0, 40.0])


def test_threads():
    f = jax.jit(lambda x: warp_kernel(axpy, S(x.shape, x.dtype))(x, x, alpha=2.0))
    base = jnp.arange(300.0, dtype=jnp.float32)
    f(base).block_until_ready()

    def work(k):
        x = base + k
        return all(np.array_equal(f(x), 3 * np.asarray(x)) for _ in range(30))

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(8)))


@pytest.mark.parametrize("spec", [P("i"), P()], ids=str)
def test_shard_map(spec):
    mesh = device_mesh((4,), ("i",))
    x = jnp.arange(64.0, dtype=jnp.float32)

    def per_shard(block):
        return warp_kernel(axpy, S(block.shape, block.dtype))(block, block, alpha=0.5)

    f = jax.jit(jax.shard_map(per_shard, mesh=mesh, in_specs=spec, out_specs=spec))
    np.testing.assert_array_equal(f(x), 1.5 * np.asarray(x))


def test_new_overloads_leave_earlier_handlers_working():
    # A new overload makes Warp build the module again; the handlers already
    # registered keep calling the machine code they were made for.
    x = jnp.arange(4, dtype=jnp.int32)
    f = jax.jit(warp_kernel(double_any, S(x.shape, x.dtype)))
    np.testing.assert_array_equal(f(x), 2 * np.asarray(x))
    y = jnp.arange(4, dtype=jnp.uint8)
    np.testing.assert_array_equal(
        warp_kernel(double_any, S(y.shape, y.dtype))(y), 2 * np.asarray(y)
    )
    gc.collect()
    np.testing.assert_array_equal(f(x + 1), 2 * np.asarray(x + 1))


def test_dtype_conversions():
    assert jaxtype_to_warptype(jnp.float32) is wp.float32
    assert jaxtype_to_warptype(np.dtype("uint16")) is wp.uint16
    assert jaxtype_to_warptype(jnp.bool_) is wp.bool
    t = jaxinfo_to_warpinfo(S((2, 3, 4), jnp.int8))
    assert (t.dtype, t.ndim) == (wp.int8, 3)


@wp.kernel
def count_visits(start: wp.array(dtype=wp.int32, ndim=2), out: wp.array(dtype=wp.int32, ndim=2)):
    # a 1-d grid over a 2-d output: the extra axis folds into threads sharing i
    i = wp.tid()
    wp.atomic_add(out, i, 0, 1)


@pytest.mark.parametrize("vmap", [False, True], ids=["plain", "vmap"])
def test_default_grid_read_from_the_output_matches_explicit_dims(vmap):
    start = jnp.zeros((3, 2), jnp.int32)
    out = S((3, 2), jnp.int32)
    default = warp_kernel(count_visits, out, input_output_aliases={0: 0})
    explicit = warp_kernel(count_visits, out, launch_dims=(3, 2), input_output_aliases={0: 0})
    if vmap:
        start = jnp.zeros((2, 3, 2), jnp.int32)
        default, explicit = jax.vmap(default), jax.vmap(explicit)
    a, b = jax.jit(default)(start), jax.jit(explicit)(start)
    np.testing.assert_array_equal(a, b)
    assert np.asarray(a)[..., 0].tolist() == ([[2, 2, 2]] * 2 if vmap else [2, 2, 2])
