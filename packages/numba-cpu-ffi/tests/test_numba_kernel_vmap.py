"""jax.vmap: the default folded native batch loop and every jax.ffi method."""

import re

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from ffi_core.bridge.cpu import _op as cpu_op
from numba_cpu_ffi import KernelCompileError, numba_kernel, parallel_min_elements

S = jax.ShapeDtypeStruct
N = 5


@numba.njit
def add(x, y, out):
    # Any rank, with numpy broadcasting: also takes expand_dims' size-1 axis.
    out[...] = x + y


@numba.njit
def running_sum(x, out):
    # Couples every element of the array it is given: a batch that reached the
    # kernel as one array would give a running sum across rows.
    xf, of = x.ravel(), out.ravel()
    acc = x.dtype.type(0)
    for i in range(xf.size):
        acc += xf[i]
        of[i] = acc


@numba.njit
def total_1d(x, out):
    # 1-d only: with a batched 2-d x, x[i] is a row and `acc +=` does not type.
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i]
    out[0] = acc


def _rows(shape, offset=0.0):
    return jnp.arange(np.prod(shape), dtype=jnp.float32).reshape(shape) + offset


def _loop(f, *xs):
    return jnp.stack([f(*(x[b] for x in xs)) for b in range(xs[0].shape[0])])


METHODS = [None, "sequential", "sequential_unrolled", "expand_dims", "broadcast_all"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_vmap_matches_loop(method, jit):
    x, y = _rows((4, N)), _rows((4, N), 100.0)
    f = numba_kernel(add, S((N,), jnp.float32), vmap_method=method)
    g = jax.vmap(f)
    g = jax.jit(g) if jit else g
    np.testing.assert_array_equal(g(x, y), _loop(f, x, y))


@pytest.mark.parametrize("method", METHODS)
def test_vmap_unbatched_input(method):
    x, y = _rows((4, N)), _rows((N,), 100.0)
    f = numba_kernel(add, S((N,), jnp.float32), vmap_method=method)
    out = jax.vmap(f, in_axes=(0, None))(x, y)
    np.testing.assert_array_equal(out, x + y[None])
    out = jax.vmap(f, in_axes=(None, 0))(y, x)
    np.testing.assert_array_equal(out, x + y[None])


@pytest.mark.parametrize("method", METHODS)
def test_vmap_axis_1(method):
    x, y = _rows((N, 3)), _rows((3, N), 100.0)
    f = numba_kernel(add, S((N,), jnp.float32), vmap_method=method)
    out = jax.vmap(f, in_axes=(1, 0))(x, y)
    np.testing.assert_array_equal(out, x.T + y)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    ("outer", "inner"),
    [((0, 0), (0, 0)), ((0, None), (0, 0)), ((None, 0), (0, None)), ((0, 0), (None, 0))],
    ids=["both-both", "x-both", "y-x", "both-y"],
)
def test_nested_vmap(method, outer, inner):
    def shape(a, b):
        return (*(s for s, d in ((2, a), (3, b)) if d is not None), N)

    x = _rows(shape(outer[0], inner[0]))
    y = _rows(shape(outer[1], inner[1]), 100.0)
    f = numba_kernel(add, S((N,), jnp.float32), vmap_method=method)
    out = jax.vmap(jax.vmap(f, in_axes=inner), in_axes=outer)(x, y)
    expected = jax.vmap(jax.vmap(jnp.add, in_axes=inner), in_axes=outer)(x, y)
    assert out.shape == (2, 3, N)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("method", [None, "sequential", "sequential_unrolled"])
def test_vmap_keeps_rows_apart(method):
    # A kernel coupling its whole array must see one row at a time.
    x = _rows((4, N))
    f = numba_kernel(running_sum, S((N,), jnp.float32), vmap_method=method)
    out = jax.jit(jax.vmap(f))(x)
    np.testing.assert_array_equal(out, _loop(f, x))
    np.testing.assert_array_equal(out, jnp.cumsum(x, axis=1))
    nested = jax.vmap(jax.vmap(f))(x.reshape(2, 2, N))
    np.testing.assert_array_equal(nested, jnp.cumsum(x, axis=1).reshape(2, 2, N))


@pytest.mark.parametrize("method", ["expand_dims", "broadcast_all"])
def test_vmap_batched_shapes_reach_kernel(method):
    # With these methods the kernel gets the whole batch as one array.
    x = _rows((4, N))
    f = numba_kernel(running_sum, S((N,), jnp.float32), vmap_method=method)
    np.testing.assert_array_equal(jax.vmap(f)(x), jnp.cumsum(x.ravel()).reshape(4, N))


def test_expand_dims_refuses_kernel_that_does_not_take_batched_shapes():
    f = numba_kernel(total_1d, S((1,), jnp.float32), vmap_method="expand_dims")
    x = _rows((4, N))
    np.testing.assert_array_equal(f(x[0]), jnp.sum(x[0])[None])
    message = (
        "kernel 'total_1d' does not compile for inputs (float32[2d]) and outputs (float32[2d]):"
    )
    with pytest.raises(KernelCompileError, match="^" + re.escape(message) + "\n"):
        jax.vmap(f)(x)
    # The default method hands the kernel single rows.
    g = numba_kernel(total_1d, S((1,), jnp.float32))
    np.testing.assert_allclose(jax.vmap(g)(x), jnp.sum(x, axis=1, keepdims=True))


@numba.njit
def square_0d(x, out):
    out[()] = x[()] * x[()]


@numba.njit
def fill_from_0d(x, out):
    for i in range(out.size):
        out[i] = x[()] + i


# 3 rows: the handler's row loop; 1000: the kernel's batch loop; 40,000 (of 16
# elements each for fill_from_0d): the rows across threads.
@pytest.mark.parametrize("rows", [3, 1000, 40_000])
@pytest.mark.parametrize("method", [None, "sequential"])
def test_vmap_of_0d_arrays(rows, method):
    # A batched rank-1 array reaches the kernel row by row as 0-d arrays, as an
    # unbatched 0-d array does: read and written with [()].
    v = jnp.arange(rows, dtype=jnp.float32) / rows
    square = numba_kernel(square_0d, S((), jnp.float32), vmap_method=method)
    fill = numba_kernel(fill_from_0d, S((16,), jnp.float32), vmap_method=method)
    np.testing.assert_allclose(square(v[1]), v[1] * v[1])
    np.testing.assert_allclose(jax.vmap(square)(v), v * v, rtol=1e-6)
    np.testing.assert_allclose(jax.jit(jax.vmap(square))(v), v * v, rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(fill)(v), v[:, None] + jnp.arange(16), rtol=1e-6)
    if method is None:
        # The path each size took: word 2 of the record is the kernel's batch
        # loop, word 3 the rows across threads (built only where threads pay);
        # a large call has a target of its own (with the cost hint).
        words = [
            (handler.record[2], handler.record[3])
            for (prefix, parts), (_, handler) in cpu_op._handlers.items()
            if prefix == "numba_cpu.fill_from_0d" and "batched=None" not in parts[1]
        ]
        assert words
        if rows == 1000:
            assert any(batch for batch, _ in words)
        if rows == 40_000 and parallel_min_elements() <= rows * 16:
            assert any(threaded for _, threaded in words)
