"""The kernel's batch loop: a default vmap of many small rows runs in one
call of a loop with the kernel inlined, not one call of the kernel per row.
It gives the row loop's results and errors; batches it does not pay for, and
kernels it cannot inline, run in the row loop."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from ffi_core.bridge.cpu import _op as cpu_op
from numba_cpu_ffi import numba_kernel, parallel_min_elements
from numba_cpu_ffi._codegen import batch_pays

S = jax.ShapeDtypeStruct
ROWS, N = 600, 8  # batch_pays(ROWS * N, ROWS): many small rows


def _batch_words(name: str) -> list[int]:
    """Word 2 (the batch loop's address) of each batched target of kernel ``name``."""
    return [
        handler.record[2]
        for (prefix, parts), (_, handler) in cpu_op._handlers.items()
        if prefix == f"numba_cpu.{name}" and "batched=None" not in parts[1]
    ]


def _loop(f, *xs, axes=None):
    axes = axes or (0,) * len(xs)
    return jnp.stack(
        [f(*(x[b] if a == 0 else x for x, a in zip(xs, axes, strict=True))) for b in range(ROWS)]
    )


@numba.njit
def scaled_cumsum(x, scale, out):
    # Couples the elements of its row (a batch reaching it as one array
    # would sum across rows) and reads an unbatched input.
    acc = x.dtype.type(0)
    for i in range(x.shape[0]):
        acc += x[i] * scale[i]
        out[i] = acc


@numba.njit
def from_scalar(x, out):
    # A rank-1 batched input: each row is a 0-d array, as an unbatched 0-d input.
    for i in range(out.shape[0]):
        out[i] = x[()] * i


@numba.njit
def square_0d(x, out):
    # A rank-1 batched output too: each row written through its 0-d view.
    out[()] = x[()] * x[()]


@numba.njit
def returns_a_value(x, out):
    for i in range(x.shape[0]):
        out[i] = x[i] * 2
    return out[0]


@numba.njit(parallel=True)
def parallel_square(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = x[i] * x[i]


@numba.njit(locals={"acc": numba.float64})
def typed_total(x, out):
    # Accumulates in float64 as its locals say (its first value is float32):
    # inlining would rename `acc` and lose the declaration.
    acc = x[0] - x[0]
    for i in range(x.shape[0]):
        acc += x[i]
    out[0] = acc


@numba.njit
def checked_row(x, out):
    for i in range(x.shape[0]):
        if x[i] < 0:
            raise ValueError("negative input")
        out[i] = x[i]


@numba.njit
def overrun(x, out):
    for i in range(x.shape[0] + 1):
        out[i] = x[i]


def _rows(shape=(ROWS, N)):
    return jnp.arange(np.prod(shape), dtype=jnp.float32).reshape(shape) / 7


def test_batch_pays_for_many_small_rows_only():
    assert batch_pays(ROWS * N, ROWS)
    assert batch_pays(4096 * 16, 4096)
    assert not batch_pays(64 * 1000, 64)  # few rows: the row calls cost < 5 µs
    assert not batch_pays(300 * 8, 300)
    assert not batch_pays(1000 * 2000, 1000)  # long rows: calls are < 10 % of the work
    assert not batch_pays(100, None)


def test_a_batch_of_many_small_rows_runs_in_the_batch_loop():
    x, scale = _rows(), jnp.linspace(0.5, 2.0, N, dtype=jnp.float32)
    f = numba_kernel(scaled_cumsum, S((N,), jnp.float32))
    got = jax.jit(jax.vmap(f, in_axes=(0, None)))(x, scale)
    np.testing.assert_allclose(got, _loop(f, x, scale, axes=(0, None)), rtol=1e-6)
    assert _batch_words("scaled_cumsum") != [] and all(_batch_words("scaled_cumsum"))


def test_0d_input_rows():
    x = jnp.arange(ROWS, dtype=jnp.float32)
    f = numba_kernel(from_scalar, S((3,), jnp.float32))
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(x), _loop(f, x))
    assert all(_batch_words("from_scalar"))


def test_0d_output_rows():
    x = jnp.arange(ROWS, dtype=jnp.float32)
    f = numba_kernel(square_0d, S((), jnp.float32))
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(x), x * x)
    words = _batch_words("square_0d")
    assert words and all(words)


def test_a_kernel_returning_a_value():
    x = _rows()
    f = numba_kernel(returns_a_value, S((N,), jnp.float32))
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(x), x * 2)
    assert all(_batch_words("returns_a_value"))


def test_a_parallel_kernel_runs_its_rows_serially_in_the_batch_loop():
    x = _rows()
    f = numba_kernel(parallel_square, S((N,), jnp.float32))
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(x), x * x)
    assert all(_batch_words("parallel_square"))


def test_a_kernel_with_locals_typing_keeps_the_row_loop():
    x = _rows() + 1e6  # float32 accumulation would lose the small parts
    f = numba_kernel(typed_total, S((1,), jnp.float32))
    want = np.asarray(x, np.float64).sum(axis=1, keepdims=True).astype(np.float32)
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(x), want)
    assert _batch_words("typed_total") == [0]


@pytest.mark.skipif(parallel_min_elements() > 10**9, reason="needs at least two Numba threads")
def test_a_batch_with_enough_work_for_threads_keeps_the_row_loop():
    cols = parallel_min_elements() // ROWS + 1
    x = jnp.ones((ROWS, cols), jnp.float32)
    f = numba_kernel(checked_row, S((cols,), jnp.float32))
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(x), x)
    assert _batch_words("checked_row") == [0]


def test_an_error_in_one_row_names_the_kernel():
    f = jax.jit(jax.vmap(numba_kernel(checked_row, S((N,), jnp.float32))))
    x = _rows()
    np.testing.assert_array_equal(f(x), x)
    message = "numba kernel 'checked_row' raised ValueError: negative input"
    with pytest.raises(Exception, match=re.escape(message)):
        f(x.at[ROWS - 1, 3].set(-1.0)).block_until_ready()
    np.testing.assert_array_equal(f(x + 1), x + 1)  # the process goes on


def test_bounds_checks_reach_the_batch_loop():
    f = numba_kernel(overrun, S((N,), jnp.float32), boundscheck=True)
    message = "numba kernel 'overrun' raised IndexError: index is out of bounds"
    with pytest.raises(Exception, match=re.escape(message)):
        jax.jit(jax.vmap(f))(_rows()).block_until_ready()
    assert all(_batch_words("overrun"))
