"""Warp kernels as Warp 1.19 documents them, run by ``warp_kernel`` unchanged.

Each section takes one way Warp lets a kernel be written or called (its
annotation styles, generic kernels and their overloads, ...) and runs it
under ``jit``, and where it applies ``vmap`` and ``grad``, on the CPU and on
ffi-core's emulated GPU (Warp's CUDA build launched by the real handler, each
launch run by Warp's CPU build on the packed bytes; see ``warp_ffi.testing``).
"""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import warp as wp
from ffi_core.bridge.cuda.testing import EmulatedGPU, emulated_gpu_fixture
from warp._src.types import type_repr
from warp_ffi import _gpu, warp_kernel
from warp_ffi._catalog import kernel_info
from warp_ffi.testing import LOWERING, on_cpu

S = jax.ShapeDtypeStruct

# One per process (a registered target keeps the handler built against the
# emulated driver it was first lowered with); these kernels are this file's own.
_GPU = on_cpu(EmulatedGPU(compute_capability=(9, 0), devices=4))
gpu = emulated_gpu_fixture(_GPU, [LOWERING])


@pytest.fixture(params=["cpu", "emulated-gpu"])
def platform(request):
    """Each test once on the CPU and once on the emulated GPU."""
    if request.param == "cpu":
        yield "cpu"
    else:
        yield request.getfixturevalue("gpu")


def raises(exc, message):
    # The whole message; JAX may add its note on filtered frames below it.
    return pytest.raises(exc, match=f"(?s)^{re.escape(message)}(\n-+\nFor simplicity, .*)?$")


def _rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# --------------------------------------------------- 1. how parameters are declared


@wp.kernel
def saxpy_subscript(x: wp.array[float], y: wp.array[float], a: float, out: wp.array[float]):
    i = wp.tid()
    out[i] = a * x[i] + y[i]


@wp.kernel
def scale_2d_subscript(x: wp.array2d[wp.float32], s: wp.float32, out: wp.array2d[wp.float32]):
    i, j = wp.tid()
    out[i, j] = x[i, j] * s + wp.float32(j)


@wp.kernel
def mixed_styles(x: wp.array(dtype=wp.float32), n: int, out: wp.array[wp.float32]):
    i = wp.tid()
    out[i] = x[i] + float(n)


@wp.kernel
def double_any(x: wp.array(dtype=Any), out: wp.array(dtype=Any)):
    i = wp.tid()
    out[i] = x[i] + x[i]


@wp.kernel
def square_any(x: wp.array[Any], out: wp.array[Any]):
    i = wp.tid()
    out[i] = x[i] * x[i]


double_int8 = double_any.add_overload([wp.array(dtype=wp.int8), wp.array(dtype=wp.int8)])
square_f32 = wp.overload(square_any, [wp.array[wp.float32], wp.array[wp.float32]])
square_f64 = wp.overload(square_any, {"x": wp.array[wp.float64], "out": wp.array[wp.float64]})


def test_subscript_annotations(platform):
    x, y = _rand(40), _rand(40, seed=1)
    op = warp_kernel(saxpy_subscript, S((40,), jnp.float32))
    np.testing.assert_allclose(jax.jit(lambda x, y: op(x, y, a=2.0))(x, y), 2 * x + y, rtol=1e-6)
    grad = jax.grad(lambda x: op(x, y, a=3.0).sum())(x)
    np.testing.assert_allclose(grad, np.full(40, 3.0))
    m = _rand(3, 5)
    op2 = warp_kernel(scale_2d_subscript, S((3, 5), jnp.float32))
    np.testing.assert_allclose(jax.jit(lambda m: op2(m, s=-1.5))(m), m * -1.5 + np.arange(5))
    op3 = warp_kernel(mixed_styles, S((40,), jnp.float32))
    np.testing.assert_allclose(op3(x, n=7), x + 7)


def test_parameters_read_from_warps_representation():
    info = kernel_info(scale_2d_subscript)
    assert [(p.name, p.dtype, p.ndim) for p in info.params] == [
        ("x", "float32", 2),
        ("s", "float32", None),
        ("out", "float32", 2),
    ]


def test_generic_kernel_in_subscript_style(platform):
    op = warp_kernel(square_any, S((6,), jnp.int16))
    x = np.arange(-3, 3, dtype=np.int16)
    np.testing.assert_array_equal(jax.jit(op)(x), x * x)


def test_overloads_passed_as_the_kernel(platform):
    x8 = np.arange(-4, 4, dtype=np.int8)
    op = warp_kernel(double_int8, S((8,), jnp.int8))
    np.testing.assert_array_equal(jax.jit(op)(x8), 2 * x8)
    x = _rand(8)
    op32 = warp_kernel(square_f32, S((8,), jnp.float32))
    np.testing.assert_allclose(jax.jit(op32)(x), x * x, rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda x: op32(x).sum())(x), 2 * x, rtol=1e-6)
    with jax.enable_x64(True):
        x64 = _rand(8, dtype=np.float64)
        op64 = warp_kernel(square_f64, S((8,), jnp.float64))
        np.testing.assert_allclose(jax.jit(op64)(x64), x64 * x64, rtol=1e-12)


def test_an_overload_is_its_own_kernel():
    # One function, three compiled kernels: three digests (so three sets of targets).
    digests = {kernel_info(k).digest for k in (square_any, square_f32, square_f64)}
    assert len(digests) == 3
    assert kernel_info(square_f32).name == "square_any"


def test_an_overload_checks_its_dtypes():
    op = warp_kernel(square_f32, S((8,), jnp.float32))
    with raises(
        TypeError,
        "input 0 of warp kernel 'square_any' (parameter 'x') is float16[1d], but the kernel "
        "declares wp.array(float32, 1-d)",
    ):
        op(jnp.ones(8, jnp.float16))


@wp.kernel
def indexed(x: wp.indexedarray[float], out: wp.array[float]):
    i = wp.tid()
    out[i] = x[i]


@wp.kernel
def any_rank(x: wp.array[float, Any], out: wp.array[float]):
    i = wp.tid()
    out[i] = 1.0


@wp.struct
class Pair:
    a: float
    b: float


@wp.kernel
def with_struct(p: Pair, out: wp.array[float]):
    i = wp.tid()
    out[i] = p.a


def test_parameters_warp_ffi_cannot_pass():
    with raises(
        TypeError,
        "parameter 'x' of warp kernel 'indexed' is a wp.indexedarray "
        "(wp.indexedarray[wp.float32]); warp-ffi passes wp.array parameters (a JAX array is "
        "a plain contiguous array)",
    ):
        warp_kernel(indexed, S((4,), jnp.float32))
    with raises(
        TypeError,
        "parameter 'x' of warp kernel 'any_rank' is wp.array[wp.float32, Any], an array of any "
        "rank; warp-ffi passes arrays of a declared rank: annotate it as wp.array[dtype] (1-d) "
        "or wp.array2d[dtype] to wp.array4d[dtype], or pass an overload (kernel.add_overload) "
        "of that rank",
    ):
        warp_kernel(any_rank, S((4,), jnp.float32))
    with raises(
        TypeError,
        f"parameter 'p' of warp kernel 'with_struct' has type {type_repr(Pair)}; warp-ffi "
        "passes wp.array "
        "parameters and scalars (bool, int8, int16, int32, int64, uint8, uint16, uint32, "
        "uint64, float16, float32, float64, bfloat16)",
    ):
        warp_kernel(with_struct, S((4,), jnp.float32))


# ------------------------------------- 2. shard_map(check_vma=True): outputs vary too


def test_scan_carry_inside_shard_map_keeps_its_varying_axes(platform):
    from ffi_core.testing import device_mesh
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = device_mesh((2,), ("r",))
    op = warp_kernel(saxpy_subscript, S((16,), jnp.float32))
    x = jax.device_put(jnp.arange(32, dtype=jnp.float32), NamedSharding(mesh, P("r")))

    def local(x):
        return jax.lax.scan(lambda c, _: (op(c, c, a=0.5), None), x, None, length=3)[0]

    sm = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=P("r"), out_specs=P("r"), check_vma=True))
    np.testing.assert_allclose(sm(x), np.arange(32) * 1.5**3, rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda x: sm(x).sum())(x), np.full(32, 1.5**3))


# --------------------------------- 4. arrays of vectors, matrices, quaternions, transforms


@wp.kernel
def mat_vec(m: wp.array[wp.mat22], v: wp.array[wp.vec2], out: wp.array[wp.vec2]):
    i = wp.tid()
    out[i] = m[i] * v[i]


@wp.kernel
def norms_2d(x: wp.array2d(dtype=wp.vec3), out: wp.array2d(dtype=float)):
    i, j = wp.tid()
    out[i, j] = wp.dot(x[i, j], x[i, j])


@wp.kernel
def transform_points(t: wp.array[wp.transform], p: wp.array[wp.vec3], out: wp.array[wp.vec3]):
    i = wp.tid()
    out[i] = wp.transform_point(t[i], p[i])


@wp.kernel
def scale_mat33(m: wp.array[wp.mat33d], s: wp.float64, out: wp.array[wp.mat33d]):
    i = wp.tid()
    out[i] = m[i] * s


def test_matrix_times_vector(platform):
    m, v = _rand(5, 2, 2), _rand(5, 2, seed=1)
    op = warp_kernel(mat_vec, S((5, 2), jnp.float32))
    np.testing.assert_allclose(jax.jit(op)(m, v), np.einsum("nij,nj->ni", m, v), rtol=1e-5)
    gm, gv = jax.grad(lambda m, v: (op(m, v) ** 2).sum(), argnums=(0, 1))(m, v)
    rm, rv = jax.grad(lambda m, v: (jnp.einsum("nij,nj->ni", m, v) ** 2).sum(), argnums=(0, 1))(
        m, v
    )
    np.testing.assert_allclose(gm, rm, rtol=1e-5)
    np.testing.assert_allclose(gv, rv, rtol=1e-5)
    # vmap: the default, one native call over the batch.
    mb, vb = _rand(3, 5, 2, 2, seed=2), _rand(3, 5, 2, seed=3)
    np.testing.assert_allclose(jax.vmap(op)(mb, vb), np.einsum("bnij,bnj->bni", mb, vb), rtol=1e-5)


def test_two_dimensional_array_of_vectors(platform):
    x = _rand(3, 4, 3)
    op = warp_kernel(norms_2d, S((3, 4), jnp.float32))
    np.testing.assert_allclose(jax.jit(op)(x), (x * x).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(jax.grad(lambda x: op(x).sum())(x), 2 * x, rtol=1e-5)


def _rotate(q, p):
    # q = (x, y, z, w), Warp's order.
    u, w = q[..., :3], q[..., 3:]
    return p + 2 * np.cross(u, np.cross(u, p) + w * p)


def test_transforms(platform):
    q = _rand(6, 4)
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    t = np.concatenate([_rand(6, 3, seed=4), q], axis=-1)  # (position, rotation)
    p = _rand(6, 3, seed=5)
    op = warp_kernel(transform_points, S((6, 3), jnp.float32))
    expected = _rotate(q, p) + t[:, :3]
    np.testing.assert_allclose(jax.jit(op)(t, p), expected, rtol=1e-5, atol=1e-6)
    # A translation moves every point by itself: its gradient is the cotangent.
    grad = jax.grad(lambda t: op(t, p).sum())(t)
    np.testing.assert_allclose(grad[:, :3], np.ones((6, 3)), rtol=1e-5)


def test_float64_matrices(platform):
    with jax.enable_x64(True):
        m = _rand(4, 3, 3, dtype=np.float64)
        op = warp_kernel(scale_mat33, S((4, 3, 3), jnp.float64))
        np.testing.assert_allclose(jax.jit(lambda m: op(m, s=2.5))(m), 2.5 * m, rtol=1e-12)
        grad = jax.grad(lambda m: op(m, s=2.5).sum())(m)
        np.testing.assert_allclose(grad, np.full((4, 3, 3), 2.5))


def test_element_axes_are_checked():
    op = warp_kernel(mat_vec, S((5, 2), jnp.float32))
    with raises(
        TypeError,
        "input 1 of warp kernel 'mat_vec' (parameter 'v') is float32[5, 3], but the kernel "
        "declares wp.array(vec2f, 1-d), so float32 with 2 axes, the last (2)",
    ):
        op(jnp.ones((5, 2, 2)), jnp.ones((5, 3)))
    with raises(
        TypeError,
        "`outs` entry 0 is float32[5], but warp kernel 'mat_vec' declares its output "
        "parameter 'out' as wp.array(vec2f, 1-d), so float32 with 2 axes, the last (2)",
    ):
        warp_kernel(mat_vec, S((5,), jnp.float32))


# -------------------------------------------------------- 5. Warp's launch limits


@wp.kernel
def fill_tid(out: wp.array[wp.int32]):
    i = wp.tid()
    out[i] = i


@wp.kernel
def fill_seven(out: wp.array[wp.int32]):
    out[0] = 7


def test_launch_dims_beyond_int32_refused_only_where_warp_refuses_them(platform):
    big = (2**31 + 1, 1)
    op = warp_kernel(fill_tid, S((4,), jnp.int32), launch_dims=big)
    with raises(
        ValueError,
        f"warp kernel 'fill_tid' cannot be launched over the grid {big}: Warp cannot launch a "
        "kernel using wp.tid() with extent 2147483649 in dimension 0. wp.tid() returns signed "
        "32-bit coordinates and supports extents up to 2147483648.",
    ):
        jax.jit(op).lower()
    # A kernel that does not read wp.tid() may launch that many threads: it
    # lowers (it is not run here: 2**31 threads on a CPU take minutes).
    jax.jit(warp_kernel(fill_seven, S((4,), jnp.int32), launch_dims=big)).lower()
    with raises(
        ValueError,
        f"warp kernel 'fill_seven' cannot be launched over the grid {(2**32,)}: dimension 0 is "
        "4294967296, but Warp's launch bounds hold each wp.tid() dimension as a 32-bit "
        "unsigned int (at most 4294967295)",
    ):
        jax.jit(warp_kernel(fill_seven, S((4,), jnp.int32), launch_dims=2**32)).lower()


# ------------------------------------------- 3. in-out parameters (in_out_argnames)


@wp.kernel
def accumulate(a: wp.array[float], b: wp.array[float], c: wp.array[float]):
    i = wp.tid()
    b[i] += a[i]
    c[i] = 2.0 * a[i]


@wp.kernel
def row_sum_into(x: wp.array2d[float], total: wp.array[float]):
    i, j = wp.tid()
    wp.atomic_add(total, i, x[i, j])


@wp.kernel
def read_two(a: wp.array[float], b: wp.array[float], out: wp.array[float]):
    i = wp.tid()
    out[i] = a[i] - b[i]


def test_in_out_parameter_returns_its_new_value_first(platform):
    a, b = _rand(10), _rand(10, seed=1)
    op = warp_kernel(accumulate, S((10,), jnp.float32), in_out_argnames=["b"])
    new_b, c = jax.jit(op)(a, b)
    np.testing.assert_allclose(new_b, a + b, rtol=1e-6)
    np.testing.assert_allclose(c, 2 * a, rtol=1e-6)
    # Another shape of the in-out array: its own aliased call.
    new_b, c = jax.jit(warp_kernel(accumulate, S((3,), jnp.float32), in_out_argnames=("b",)))(
        a[:3], b[:3]
    )
    np.testing.assert_allclose(new_b, a[:3] + b[:3], rtol=1e-6)


def test_in_out_only_kernel_under_vmap_and_scan(platform):
    x = _rand(4, 6)
    op = warp_kernel(row_sum_into, (), in_out_argnames=["total"], launch_dims=lambda x, t: x)
    (total,) = jax.jit(op)(x, np.ones(4, np.float32))
    np.testing.assert_allclose(total, 1 + x.sum(1), rtol=1e-5)
    # vmap over the rows' batch with an unbatched starting value: each row
    # starts from its own copy of it.
    xs = _rand(3, 4, 6, seed=2)
    (totals,) = jax.jit(jax.vmap(op, in_axes=(0, None)))(xs, np.zeros(4, np.float32))
    np.testing.assert_allclose(totals, xs.sum(2), rtol=1e-5)
    # A scan carry updated in place.
    run = jax.jit(lambda t: jax.lax.scan(lambda t, _: (op(x, t)[0], None), t, None, length=3)[0])
    np.testing.assert_allclose(run(np.zeros(4, np.float32)), 3 * x.sum(1), rtol=1e-5)


def test_in_out_buffer_is_donated_not_copied():
    op = jax.jit(
        warp_kernel(accumulate, S((8,), jnp.float32), in_out_argnames=["b"]), donate_argnums=1
    )
    a = jnp.ones(8, jnp.float32)
    b = jnp.arange(8, dtype=jnp.float32)
    pointer = b.unsafe_buffer_pointer()
    assert "copy" not in op.lower(a, b).compile().as_text()
    new_b, _ = op(a, b)
    assert b.is_deleted()
    assert new_b.unsafe_buffer_pointer() == pointer
    np.testing.assert_allclose(new_b, np.arange(8) + 1)


def test_in_out_names_pick_different_targets():
    a, b = _rand(5), _rand(5, seed=1)
    on_a = warp_kernel(read_two, S((5,), jnp.float32), in_out_argnames=["a"])
    on_b = warp_kernel(read_two, S((5,), jnp.float32), in_out_argnames=["b"])
    same_a, out_a = jax.jit(on_a)(a, b)
    same_b, out_b = jax.jit(on_b)(a, b)
    np.testing.assert_array_equal(same_a, a)
    np.testing.assert_array_equal(same_b, b)
    np.testing.assert_allclose(out_a, a - b)
    np.testing.assert_allclose(out_b, a - b)

    def targets(op):
        text = jax.jit(op).lower(a, b).as_text()
        return set(re.findall(r"custom_call @(\S+)\(", text)) or set(
            re.findall(r'call_target_name = "([^"]+)"', text)
        )

    assert targets(on_a) and targets(on_a).isdisjoint(targets(on_b))


def test_in_out_under_sharded_jit(platform):
    from ffi_core.testing import device_mesh
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = device_mesh((2,), ("r",))
    op = warp_kernel(
        accumulate, S((16,), jnp.float32), in_out_argnames=["b"], sharding_rule="elementwise"
    )
    put = lambda v: jax.device_put(v, NamedSharding(mesh, P("r")))  # noqa: E731
    a, b = _rand(16), _rand(16, seed=1)
    new_b, c = jax.jit(op)(put(a), put(b))
    np.testing.assert_allclose(new_b, a + b, rtol=1e-6)
    np.testing.assert_allclose(c, 2 * a, rtol=1e-6)
    assert new_b.sharding.spec == P("r")


def test_in_out_gradient_is_refused_with_the_fix():
    op = warp_kernel(accumulate, S((4,), jnp.float32), in_out_argnames=["b"])
    with raises(
        NotImplementedError,
        "warp kernel 'accumulate' has in-out parameters ('b'); its gradient is not available: "
        "Warp's adjoint keeps one gradient per array, so an array both read and written would "
        "get its result's gradient added to its starting value's. To differentiate, give the "
        "kernel a separate input and output parameter for each (read 'x_in', write 'x_out')",
    ):
        jax.grad(lambda a: op(a, jnp.zeros(4))[1].sum())(jnp.ones(4))


@pytest.mark.parametrize(
    ("names", "kwargs", "exc", "message"),
    [
        (
            "b",
            {},
            TypeError,
            "`in_out_argnames` must be a sequence of parameter names (a list or tuple of str), "
            "got 'b'",
        ),
        (["b", 1], {}, TypeError, "`in_out_argnames` must hold parameter names (str), got 1"),
        (["b", "b"], {}, ValueError, "`in_out_argnames` names parameter 'b' twice: ['b', 'b']"),
        (
            ["z"],
            {},
            ValueError,
            "`in_out_argnames` names 'z', but that is no parameter of warp kernel 'accumulate'; "
            "in-out parameters are among its array inputs (a, b)",
        ),
        (
            ["c"],
            {},
            ValueError,
            "`in_out_argnames` names 'c', but `outs` describes it: the last 1 array parameters "
            "of warp kernel 'accumulate' (c) are its output-only ones; an in-out parameter "
            "comes before them, and `outs` describes only the output-only ones",
        ),
        (
            ["b"],
            {"input_output_aliases": {0: 0}},
            ValueError,
            "`input_output_aliases` cannot be combined with `in_out_argnames`; declare each "
            "array the kernel updates in place as an in-out parameter",
        ),
    ],
)
def test_in_out_argnames_refused(names, kwargs, exc, message):
    with raises(exc, message):
        warp_kernel(accumulate, S((4,), jnp.float32), in_out_argnames=names, **kwargs)


def test_in_out_names_a_scalar_parameter():
    with raises(
        ValueError,
        "`in_out_argnames` names 'a', but that is a scalar parameter of warp kernel "
        "'saxpy_subscript'; in-out parameters are among its array inputs (x, y)",
    ):
        warp_kernel(saxpy_subscript, S((4,), jnp.float32), in_out_argnames=["a"])


def test_in_out_call_checks_name_the_input():
    op = warp_kernel(accumulate, S((4,), jnp.float32), in_out_argnames=["b"])
    with raises(
        TypeError,
        "input 1 of warp kernel 'accumulate' (parameter 'b') is int32[1d], but the kernel "
        "declares wp.array(float32, 1-d)",
    ):
        op(jnp.ones(4), jnp.ones(4, jnp.int32))


# ------------------------------------------------------- 5. block_dim (tile kernels)


@wp.kernel(module="unique")
def scale_by_block(a: wp.array[float], b: wp.array[float]):
    i = wp.tid()
    b[i] = a[i] * float(wp.block_dim())


@wp.kernel(module="unique")
def block_sums(out: wp.array[int]):
    i = wp.tid()
    out[i] = 0
    s = wp.tile_sum(wp.tile(i))
    wp.tile_store(out, s, offset=i)


def _block_sums(n, block):
    expected = np.zeros(n, np.int32)
    for start in range(0, n, block):
        expected[start] = sum(range(start, start + block))
    return expected


def test_block_dim_on_the_cpu_follows_warp(monkeypatch):
    x = jnp.arange(32, dtype=jnp.float32)
    # Warp's CPU launches one thread per block unless cooperative CPU blocks are on.
    for block_dim in (None, 16):
        op = warp_kernel(scale_by_block, S((32,), jnp.float32), block_dim=block_dim)
        np.testing.assert_allclose(jax.jit(op)(x), x)
        tiles = warp_kernel(block_sums, S((32,), jnp.int32), block_dim=block_dim)
        np.testing.assert_array_equal(jax.jit(tiles)(), np.arange(32))
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", True)
    for block_dim in (8, 16):
        op = warp_kernel(scale_by_block, S((32,), jnp.float32), block_dim=block_dim)
        np.testing.assert_allclose(jax.jit(op)(x), x * block_dim)
        grad = jax.jit(jax.grad(lambda x, op=op: op(x).sum()))(x)
        np.testing.assert_allclose(grad, np.full(32, float(block_dim)))
        rows = jax.jit(jax.vmap(op))(jnp.stack([x, -x]))
        np.testing.assert_allclose(rows, np.stack([x, -x]) * block_dim)
        tiles = warp_kernel(block_sums, S((32,), jnp.int32), block_dim=block_dim)
        np.testing.assert_array_equal(jax.jit(tiles)(), _block_sums(32, block_dim))


def test_block_dim_on_the_gpu_is_the_launch_block(gpu):
    x = jnp.arange(64, dtype=jnp.float32)
    op = warp_kernel(scale_by_block, S((64,), jnp.float32), block_dim=32)
    jax.jit(op).lower(x)
    # Warp built the kernel's CUDA module for 32 threads per block.
    kernel = kernel_info(scale_by_block).kernel
    assert 32 in {key[3] for key in _gpu._images if key[0] is kernel}
    # The emulated GPU runs Warp's CPU build (one thread per block) on the packed launch.
    np.testing.assert_allclose(jax.jit(op)(x), x)
    grad = jax.jit(jax.grad(lambda x: op(x).sum()))(x)
    np.testing.assert_allclose(grad, np.ones(64))
    # Every launch, the adjoint's too: 2 blocks of 32 threads over the 64.
    assert gpu.launches
    assert {(grid, block) for grid, block, _, _ in gpu.launches} == {((2, 1, 1), (32, 1, 1))}


@pytest.mark.parametrize(
    ("block_dim", "exc", "message"),
    [
        (True, TypeError, "`block_dim` must be an int or None, got True"),
        (1.5, TypeError, "`block_dim` must be an int or None, got 1.5"),
        (0, ValueError, "`block_dim` must be in 1..1024 (threads per block), got 0"),
        (2048, ValueError, "`block_dim` must be in 1..1024 (threads per block), got 2048"),
    ],
)
def test_block_dim_refused(block_dim, exc, message):
    with raises(exc, message):
        warp_kernel(scale_by_block, S((4,), jnp.float32), block_dim=block_dim)


# ----------------------------------------------------------------------- bfloat16


@wp.kernel
def scale_bf16(x: wp.array[wp.bfloat16], s: wp.bfloat16, out: wp.array[wp.bfloat16]):
    i = wp.tid()
    out[i] = x[i] * s


def test_bfloat16_arrays_and_scalars(platform):
    x = jnp.arange(-4, 4, dtype=jnp.bfloat16)
    op = warp_kernel(scale_bf16, S((8,), jnp.bfloat16))
    out = jax.jit(lambda x: op(x, s=1.5))(x)
    assert out.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(out, np.float32), np.arange(-4, 4) * 1.5)
    grad = jax.grad(lambda x: op(x, s=-2.0).astype(jnp.float32).sum())(x)
    np.testing.assert_array_equal(np.asarray(grad, np.float32), np.full(8, -2.0))
    rows = jax.vmap(lambda x: op(x, s=2.0))(jnp.stack([x, x + 1]))
    np.testing.assert_array_equal(np.asarray(rows, np.float32)[1], (np.arange(-4, 4) + 1) * 2.0)


@pytest.mark.parametrize("n_args", [0, 1, 3])
def test_in_out_op_called_with_another_number_of_inputs(n_args):
    op = warp_kernel(accumulate, S((4,), jnp.float32), in_out_argnames=["b"])
    with raises(
        TypeError,
        "warp kernel 'accumulate' takes 2 input arrays (a, b; 'b' read and written, from "
        f"`in_out_argnames`), but is called with {n_args} positional arguments",
    ):
        op(*[jnp.ones(4)] * n_args)
