"""jax.grad / jax.vjp through Warp kernels run Warp's adjoint kernel natively,
checked against finite differences and pure-JAX references."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import warp as wp
from jax.test_util import check_grads
from warp_ffi import warp_kernel

S = jax.ShapeDtypeStruct
f64 = wp.float64


@wp.kernel
def sin_mul(x: wp.array(dtype=f64), out: wp.array(dtype=f64)):
    i = wp.tid()
    out[i] = wp.sin(x[i]) * x[i]


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
def matvec(m: wp.array(dtype=f64, ndim=2), v: wp.array(dtype=f64), out: wp.array(dtype=f64)):
    i = wp.tid()
    total = f64(0.0)
    for j in range(v.shape[0]):
        total += m[i, j] * v[j]
    out[i] = total


@wp.kernel
def gather(index: wp.array(dtype=wp.int32), x: wp.array(dtype=f64), out: wp.array(dtype=f64)):
    i = wp.tid()
    out[i] = x[index[i]] * x[index[i]]


@wp.kernel(enable_backward=False)
def no_adjoint(x: wp.array(dtype=f64), out: wp.array(dtype=f64)):
    i = wp.tid()
    out[i] = x[i] * f64(2.0)


@pytest.fixture(autouse=True)
def _x64():
    ctx = jax.enable_x64(True) if hasattr(jax, "enable_x64") else jax.experimental.enable_x64()
    with ctx:
        yield


def test_elementwise_against_finite_differences_and_jax():
    x = jnp.linspace(-2.0, 2.0, 7)
    f = warp_kernel(sin_mul, S(x.shape, jnp.float64))
    check_grads(f, (x,), order=1, modes=["rev"])
    np.testing.assert_allclose(
        jax.grad(lambda x: f(x).sum())(x), jnp.cos(x) * x + jnp.sin(x), rtol=1e-12
    )
    np.testing.assert_allclose(jax.jit(jax.jacrev(f))(x), np.diag(jnp.cos(x) * x + jnp.sin(x)))


def test_two_inputs_two_outputs_and_a_scalar():
    x, y = jnp.linspace(-1.0, 1.0, 5), jnp.linspace(0.5, 2.0, 5)
    f = warp_kernel(mix, [S((5,), jnp.float64), S((5,), jnp.float64)])

    def op(x, y):
        a, b = f(x, y, alpha=1.5)
        return a * 2 + b**2

    def ref(x, y):
        return 1.5 * x * y * 2 + (jnp.exp(x) - y * y) ** 2

    check_grads(op, (x, y), order=1, modes=["rev"])
    for got, want in zip(
        jax.grad(lambda *a: op(*a).sum(), argnums=(0, 1))(x, y),
        jax.grad(lambda *a: ref(*a).sum(), argnums=(0, 1))(x, y),
        strict=True,
    ):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_reduction_kernel():
    m = jnp.arange(12.0).reshape(3, 4) / 7
    v = jnp.linspace(1.0, 2.0, 4)
    f = warp_kernel(matvec, S((3,), jnp.float64))
    check_grads(f, (m, v), order=1, modes=["rev"])
    gm, gv = jax.grad(lambda m, v: (f(m, v) ** 2).sum(), argnums=(0, 1))(m, v)
    rm, rv = jax.grad(lambda m, v: ((m @ v) ** 2).sum(), argnums=(0, 1))(m, v)
    np.testing.assert_allclose(gm, rm, rtol=1e-12)
    np.testing.assert_allclose(gv, rv, rtol=1e-12)


def test_integer_inputs_get_zero_cotangents_and_gathers_accumulate():
    index = jnp.array([0, 2, 2, 1], jnp.int32)
    x = jnp.array([1.0, -2.0, 3.0])
    f = warp_kernel(gather, S((4,), jnp.float64))
    g = jax.grad(lambda x: f(index, x).sum())(x)
    np.testing.assert_allclose(g, [2.0, -4.0, 12.0])  # index 2 read twice: 2 * (2 * 3)
    _, vjp = jax.vjp(f, index, x)
    gi, gx = vjp(jnp.ones(4))
    assert gi.dtype == jax.dtypes.float0
    np.testing.assert_allclose(gx, g)


def test_vmap_and_jit_of_grad():
    xs = jnp.stack([jnp.linspace(-1.0, 1.0, 5), jnp.linspace(0.0, 3.0, 5)])
    f = warp_kernel(sin_mul, S((5,), jnp.float64))
    got = jax.jit(jax.vmap(jax.grad(lambda x: f(x).sum())))(xs)
    np.testing.assert_allclose(got, jnp.cos(xs) * xs + jnp.sin(xs), rtol=1e-12)
    got = jax.grad(lambda xs: jax.vmap(f)(xs).sum())(xs)
    np.testing.assert_allclose(got, jnp.cos(xs) * xs + jnp.sin(xs), rtol=1e-12)


def test_kernel_without_adjoint():
    x = jnp.ones(3)
    f = warp_kernel(no_adjoint, S((3,), jnp.float64))
    np.testing.assert_array_equal(f(x), 2 * np.ones(3))
    with pytest.raises(
        NotImplementedError,
        match=re.escape(
            "warp kernel 'no_adjoint' has no adjoint: its module or kernel was compiled with "
            "enable_backward=False; set it to True (wp.set_module_options or "
            "@wp.kernel(enable_backward=True)) to differentiate through it"
        ),
    ):
        jax.grad(lambda x: f(x).sum())(x)


def test_grad_with_aliases_is_refused():
    x = jnp.ones(3)
    f = warp_kernel(sin_mul, S((3,), jnp.float64), input_output_aliases={0: 0})
    with pytest.raises(
        NotImplementedError,
        match=re.escape(
            "warp kernel 'sin_mul' is called with input_output_aliases; its gradient is not "
            "available (an aliased output's starting value would need its own adjoint): pass "
            "the starting value as a separate input instead"
        ),
    ):
        jax.grad(lambda x: f(x).sum())(x)


def test_forward_mode_is_jaxs_custom_vjp_error():
    f = warp_kernel(sin_mul, S((3,), jnp.float64))
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        jax.jvp(f, (jnp.ones(3),), (jnp.ones(3),))
