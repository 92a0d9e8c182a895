"""jax.vmap of Warp kernels: by default one native call that launches the
kernel on each batch row's slices; the jax.ffi methods too."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import warp as wp
from warp_ffi import warp_kernel

S = jax.ShapeDtypeStruct


@wp.kernel
def axpy(
    x: wp.array(dtype=wp.float32),
    y: wp.array(dtype=wp.float32),
    alpha: float,
    out: wp.array(dtype=wp.float32),
):
    i = wp.tid()
    out[i] = alpha * x[i] + y[i]


@wp.kernel
def row_sum(x: wp.array(dtype=wp.float32, ndim=2), out: wp.array(dtype=wp.float32)):
    # couples the elements of a row: a kernel that must see its own row
    i = wp.tid()
    total = float(0.0)  # noqa: UP018 - a dynamic variable to Warp, not a constant
    for j in range(x.shape[1]):
        total += x[i, j]
    out[i] = total


@wp.kernel
def prefix(x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    # every thread reads the whole row
    i = wp.tid()
    total = float(0.0)  # noqa: UP018 - a dynamic variable to Warp, not a constant
    for j in range(i + 1):
        total += x[j]
    out[i] = total


@wp.kernel
def batched_scale(x: wp.array(dtype=wp.float32, ndim=2), out: wp.array(dtype=wp.float32, ndim=2)):
    # written for the batched arrays of vmap_method="expand_dims"/"broadcast_all"
    b, i = wp.tid()
    out[b, i] = 2.0 * x[b, i]


X = jnp.arange(24.0, dtype=jnp.float32).reshape(4, 6)


@pytest.mark.parametrize("method", [None, "sequential", "sequential_unrolled"])
@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0), (1, 0)], ids=str)
def test_vmap_axpy(method, in_axes):
    f = warp_kernel(axpy, S((4,) if in_axes[0] == 1 else (6,), jnp.float32), vmap_method=method)
    x = X if in_axes[0] != 1 else X[:, :4].T.copy().T  # (4, 4) batched along axis 1
    if in_axes[0] == 1:
        x = X[:, :4]
        y = jnp.ones((4, 4), jnp.float32)
    else:
        y = X[0] if in_axes[1] is None else X + 1
        x = X[0] if in_axes[0] is None else X
    g = jax.vmap(lambda a, b: f(a, b, alpha=3.0), in_axes=in_axes)
    xs = np.moveaxis(np.asarray(x), in_axes[0], 0) if in_axes[0] is not None else None
    ys = np.asarray(y) if in_axes[1] is not None else None
    expected = 3.0 * (xs if xs is not None else np.asarray(x)) + (
        ys if ys is not None else np.asarray(y)
    )
    np.testing.assert_allclose(jax.jit(g)(x, y), expected)


def test_rows_see_their_own_row():
    f = warp_kernel(prefix, S((6,), jnp.float32))
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(X), np.cumsum(np.asarray(X), axis=1))
    g = warp_kernel(row_sum, S((2,), jnp.float32))
    x3 = X.reshape(2, 2, 6)
    np.testing.assert_array_equal(jax.vmap(g)(x3), np.asarray(x3).sum(-1))


def test_nested_vmap():
    f = warp_kernel(prefix, S((6,), jnp.float32))
    x = jnp.arange(2 * 3 * 6, dtype=jnp.float32).reshape(2, 3, 6)
    np.testing.assert_array_equal(jax.jit(jax.vmap(jax.vmap(f)))(x), np.cumsum(x, axis=-1))
    h = warp_kernel(axpy, S((6,), jnp.float32))
    out = jax.vmap(jax.vmap(lambda a, b: h(a, b, alpha=1.0), in_axes=(0, None)), in_axes=(None, 0))(
        X[:2], X[2:]
    )
    expected = np.asarray(X[:2])[None, :, :] + np.asarray(X[2:])[:, None, :]
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("method", ["expand_dims", "broadcast_all"])
def test_ffi_methods_pass_batched_arrays(method):
    f = warp_kernel(batched_scale, S((6,), jnp.float32), vmap_method=method)
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(X), 2 * np.asarray(X))
    with pytest.raises(
        TypeError,
        match=re.escape(
            "input 0 of warp kernel 'batched_scale' (parameter 'x') is float32[1d], but the "
            "kernel declares wp.array(float32, 2-d)"
        ),
    ):
        f(X[0])  # unbatched: the kernel is written for the batched arrays


def test_vmap_of_an_aliased_call():
    @jax.vmap
    def g(x):
        return warp_kernel(axpy, S((6,), jnp.float32), input_output_aliases={1: 0})(x, x, alpha=1.0)

    np.testing.assert_array_equal(g(X), 2 * np.asarray(X))
