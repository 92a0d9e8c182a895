"""Calls eagerly and under jit: input/output counts, output structures, parallel
kernels, dtypes and shapes."""

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from numba_cpu_ffi import SUPPORTED_DTYPES, numba_kernel

S = jax.ShapeDtypeStruct


@numba.njit
def copy(x, out):
    out[...] = x


@numba.njit
def iota(out):
    for i in range(out.size):
        out[i] = i


@numba.njit
def three_two(a, b, c, total, prod):
    for i in range(a.shape[0]):
        total[i] = a[i] + b[i] + c[i]
        prod[i] = a[i] * b[i] * c[i]


@numba.njit
def halves(x, lo, hi):
    n = lo.shape[0]
    for i in range(n):
        lo[i] = x[i]
        hi[i] = x[n + i]


@numba.njit(parallel=True)
def parallel_square(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = x[i] * x[i]


@numba.njit
def flat_double(x, out):
    xf, of = x.ravel(), out.ravel()
    for i in range(xf.size):
        of[i] = 2 * xf[i]


def _eager_and_jit(f):
    return [f, jax.jit(f)]


@pytest.mark.parametrize("jit", [False, True])
def test_zero_inputs_one_output(jit):
    f = numba_kernel(iota, S((5,), jnp.int32))
    f = jax.jit(f) if jit else f
    out = f()
    assert out.dtype == jnp.int32
    np.testing.assert_array_equal(out, np.arange(5))


@pytest.mark.parametrize("jit", [False, True])
def test_three_inputs_two_outputs(jit):
    a, b, c = (jnp.arange(4.0, dtype=jnp.float32) + k for k in range(3))
    f = numba_kernel(three_two, [S((4,), jnp.float32)] * 2)
    f = jax.jit(f) if jit else f
    total, prod = f(a, b, c)
    np.testing.assert_allclose(total, a + b + c)
    np.testing.assert_allclose(prod, a * b * c)


def test_single_output_is_an_array():
    x = jnp.arange(6.0, dtype=jnp.float32)
    f = numba_kernel(copy, S((6,), jnp.float32))
    for g in _eager_and_jit(f):
        out = g(x)
        assert isinstance(out, jax.Array)
        np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("container", [list, tuple])
def test_sequence_outputs_give_a_tuple(container):
    x = jnp.arange(6.0, dtype=jnp.float32)
    f = numba_kernel(halves, container([S((3,), jnp.float32)] * 2))
    for g in _eager_and_jit(f):
        out = g(x)
        assert type(out) is tuple and len(out) == 2
        np.testing.assert_array_equal(out[0], x[:3])
        np.testing.assert_array_equal(out[1], x[3:])


def test_dict_outputs_give_the_same_dict():
    x = jnp.arange(6.0, dtype=jnp.float32)
    f = numba_kernel(halves, {"lo": S((3,), jnp.float32), "hi": S((3,), jnp.float32)})
    for g in _eager_and_jit(f):
        out = g(x)
        assert isinstance(out, dict) and set(out) == {"lo", "hi"}
        # A dict's outputs reach the kernel in key order: "hi" before "lo".
        np.testing.assert_array_equal(out["hi"], x[:3])
        np.testing.assert_array_equal(out["lo"], x[3:])


@pytest.mark.parametrize("jit", [False, True])
def test_parallel_prange_kernel(jit):
    x = jnp.arange(1000, dtype=jnp.float32)
    f = numba_kernel(parallel_square, S(x.shape, x.dtype))
    f = jax.jit(f) if jit else f
    np.testing.assert_array_equal(f(x), x * x)


_X64 = {"int64", "uint64", "float64", "complex128"}


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES)
def test_dtypes(dtype):
    values = (np.arange(6) % 3).astype(dtype).reshape(2, 3)
    with jax.enable_x64(dtype in _X64):
        x = jnp.asarray(values)
        assert x.dtype == np.dtype(dtype)
        f = numba_kernel(copy, S(x.shape, x.dtype))
        for g in _eager_and_jit(f):
            out = g(x)
            assert out.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(out, values)


def test_supported_dtypes():
    assert SUPPORTED_DTYPES == (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float32", "float64", "complex64", "complex128",
    )  # fmt: skip


@pytest.mark.parametrize(
    "shape",
    [(), (0,), (3, 0), (5,), (2, 3), (2, 3, 4), (2, 1, 3, 2)],
    ids=lambda s: "x".join(map(str, s)) or "scalar",
)
def test_shapes(shape):
    x = jnp.arange(int(np.prod(shape)), dtype=jnp.float32).reshape(shape)
    f = numba_kernel(flat_double, S(shape, jnp.float32))
    for g in _eager_and_jit(f):
        out = g(x)
        assert out.shape == shape
        np.testing.assert_array_equal(out, 2 * x)


def test_numpy_inputs():
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(numba_kernel(flat_double, S((4,), jnp.float32))(x), 2 * x)
    s = np.float32(1.5)
    np.testing.assert_array_equal(numba_kernel(flat_double, S((), jnp.float32))(s), 3.0)


def test_wrapper_names_the_kernel():
    f = numba_kernel(copy, S((3,), jnp.float32))
    assert f.__name__ == "copy"
    assert f.__doc__ == "numba kernel 'copy' as a JAX operation."


class _Spec:
    """Not JAX's: any object with `shape` and `dtype` describes an output."""

    shape = (2,)
    dtype = np.dtype(np.float32)


@pytest.mark.parametrize(
    "spec",
    [
        S((2,), jnp.float32),
        jax.core.ShapedArray((2,), jnp.float32),
        np.zeros(2, np.float32),
        _Spec(),
    ],
    ids=["ShapeDtypeStruct", "ShapedArray", "array", "shape-and-dtype"],
)
def test_outs_of_every_kind(spec):
    x = jnp.asarray([1.0, 2.0], jnp.float32)
    np.testing.assert_array_equal(jax.jit(numba_kernel(copy, spec))(x), x)
    a, b = numba_kernel(halves, [spec, spec])(jnp.arange(4.0, dtype=jnp.float32))
    np.testing.assert_array_equal(a, [0.0, 1.0])
    np.testing.assert_array_equal(b, [2.0, 3.0])
    out = numba_kernel(halves, {"a": spec, "b": spec})(jnp.arange(4.0, dtype=jnp.float32))
    np.testing.assert_array_equal(out["b"], [2.0, 3.0])
