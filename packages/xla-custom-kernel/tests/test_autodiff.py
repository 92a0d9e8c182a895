import re

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
import xla_custom_kernel as xck
from jax.interpreters import ad
from jax.test_util import check_grads
from xla_custom_kernel import XLACustomKernel


@numba.njit
def _mul(a, x, out):
    for i in range(x.size):
        out[i] = a[i] * x[i]


@numba.njit
def _times2(x, out):
    for i in range(x.size):
        out[i] = 2 * x[i]


def _like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def _mul_op(name, *, transpose=True):
    """a * x, bilinear: its JVP and transpose rules call the kernel itself."""
    k = XLACustomKernel(name)
    k.def_numba_kernel(lambda outs: _mul)
    k.def_jax_kernel(lambda outs: lambda a, x: a * x)
    k.def_jvp_rule2(
        lambda ta, a, x, outs: k(ta, x, outs=outs),
        lambda tx, a, x, outs: k(a, tx, outs=outs),
    )
    if transpose:

        @k.def_transpose_rule
        def _(cts, a, x, *, outs):
            (ct,) = cts
            if ad.is_undefined_primal(a):
                return [k(ct, x, outs=outs), None]
            return [None, k(a, ct, outs=outs)]

    return k


def _mul_call(k, backend=None):
    return lambda a, x: k(a, x, outs=_like(x), backend=backend)


def _data(*shape, dtype=np.float32):
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal(shape).astype(dtype) for _ in range(2))


@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_jvp_rule2(name, backend):
    k = _mul_op(name)
    a, x = _data(5)
    ta, tx = _data(5)
    y, t = jax.jvp(_mul_call(k, backend), (a, x), (ta, tx))
    np.testing.assert_allclose(y, a * x, rtol=1e-6)
    np.testing.assert_allclose(t, ta * x + a * tx, rtol=1e-6)
    # One input's tangent symbolically zero: its rule is skipped.
    _, t = jax.jvp(lambda x: k(a, x, outs=_like(x), backend=backend), (x,), (tx,))
    np.testing.assert_allclose(t, a * tx, rtol=1e-6)


@pytest.mark.parametrize("target", ["kernel", "primitive"])
def test_defjvp_with_kernel_or_primitive(name, target):
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs: lambda x, y: x * y)
    xck.defjvp(k if target == "kernel" else k.primitive, lambda tx, x, y, outs: tx * y, None)
    x, y = _data(4)
    ones = np.ones(4, np.float32)
    _, t = jax.jvp(lambda x, y: k(x, y, outs=_like(x)), (x, y), (ones, ones))
    np.testing.assert_allclose(t, y)  # y's derivative declared zero


def test_defjvp_refuses_other_primitives():
    with pytest.raises(
        TypeError,
        match=re.escape(
            "`primitive` must be an XLACustomKernel or the primitive of one, got sin; "
            "for other primitives use jax.interpreters.ad.defjvp"
        ),
    ):
        xck.defjvp(jax.lax.sin_p, None)


def test_full_jvp_rule_with_several_outputs(name):
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs: lambda x: (x * x, x.astype(jnp.int32)))

    @k.def_jvp_rule
    def _(primals, tangents, *, outs):
        (x,), (t,) = primals, tangents
        return k(x, outs=outs), [2 * x * t, None]  # None: zero tangent

    def f(x):
        return k(x, outs=(_like(x), jax.ShapeDtypeStruct(x.shape, np.int32)))

    x = np.arange(1.0, 4.0, dtype=np.float32)
    (sq, ints), (t_sq, t_ints) = jax.jvp(f, (x,), (np.ones(3, np.float32),))
    np.testing.assert_array_equal(sq, x * x)
    np.testing.assert_array_equal(ints, [1, 2, 3])
    np.testing.assert_array_equal(t_sq, 2 * x)
    assert t_ints.dtype == jax.dtypes.float0
    np.testing.assert_array_equal(jax.grad(lambda x: f(x)[0].sum())(x), 2 * x)
    np.testing.assert_array_equal(jax.jacfwd(lambda x: f(x)[0])(x), np.diag(2 * x))


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (lambda primals, tangents, outs: primals, "got <class 'list'>"),
        (lambda primals, tangents, outs: 3, "got <class 'int'>"),
    ],
    ids=["one-list", "int"],
)
def test_full_jvp_rule_returning_no_pair(name, rule, message):
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs: lambda x: x)
    k.def_jvp_rule(rule)
    x = np.ones(3, np.float32)
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"the JVP rule of kernel {name!r} must return (primal_outs, tangent_outs), {message}"
        ),
    ):
        jax.jvp(lambda x: k(x, outs=_like(x)), (x,), (x,))


def test_jvp_rule2_arity_mismatch(name):
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs: lambda x, y: x + y)
    k.def_jvp_rule2(lambda t, x, y, outs: t)
    x = np.ones(3, np.float32)
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"kernel {name!r} has 1 JVP rules (def_jvp_rule2) but is called with 2 inputs; give "
            "exactly one rule per input, None where the derivative is zero"
        ),
    ):
        k(x, x, outs=_like(x))  # refused at the call, before any transform


def test_missing_jvp_rule(name):
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs: lambda x: x)
    x = np.ones(3, np.float32)
    message = re.escape(
        f"kernel {name!r} has no JVP rule, so it cannot be differentiated; define one with "
        "def_jvp_rule or def_jvp_rule2 (or use jax.custom_jvp/custom_vjp around the call)"
    )
    with pytest.raises(NotImplementedError, match=message):
        jax.jvp(lambda x: k(x, outs=_like(x)), (x,), (x,))
    with pytest.raises(NotImplementedError, match=message):
        jax.grad(lambda x: k(x, outs=_like(x)).sum())(x)


def test_missing_transpose_rule(name):
    k = _mul_op(name, transpose=False)
    a, x = _data(3)
    np.testing.assert_allclose(jax.jvp(_mul_call(k), (a, x), (a, x))[1], 2 * a * x, rtol=1e-6)
    with pytest.raises(
        NotImplementedError,
        match=re.escape(
            f"kernel {name!r} has no transpose rule, so it cannot be used in reverse mode "
            "(jax.grad, jax.vjp, jax.linear_transpose); define one with def_transpose_rule"
        ),
    ):
        jax.grad(lambda a, x: k(a, x, outs=_like(x)).sum())(a, x)


def test_transpose_rule_returning_wrong_count(name):
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs: lambda x: x * 2)
    k.def_jvp_rule2(lambda t, x, outs: k(t, outs=outs))
    k.def_transpose_rule(lambda cts, x, outs: [cts[0] * 2, None])
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"the transpose rule of kernel {name!r} must return one cotangent per input "
            "(1, None for inputs that are not linear), got 2 values"
        ),
    ):
        jax.grad(lambda x: k(x, outs=_like(x)).sum())(np.ones(3, np.float32))


@pytest.mark.parametrize("backend", ["numba", "jax"])
@pytest.mark.parametrize("jit", [False, True])
def test_grad_and_vjp(name, backend, jit):
    k = _mul_op(name)
    a, x = _data(5)
    loss = lambda a, x: (_mul_call(k, backend)(a, x) ** 2).sum()  # noqa: E731
    ga, gx = (jax.jit(jax.grad(loss, argnums=(0, 1))) if jit else jax.grad(loss, argnums=(0, 1)))(
        a, x
    )
    np.testing.assert_allclose(ga, 2 * a * x * x, rtol=1e-5)
    np.testing.assert_allclose(gx, 2 * a * a * x, rtol=1e-5)
    y, vjp = jax.vjp(_mul_call(k, backend), a, x)
    ct = np.arange(5.0, dtype=np.float32)
    ca, cx = vjp(ct)
    np.testing.assert_allclose(y, a * x, rtol=1e-6)
    np.testing.assert_allclose(ca, ct * x, rtol=1e-6)
    np.testing.assert_allclose(cx, ct * a, rtol=1e-6)


@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_linear_transpose(name, backend):
    k = _mul_op(name)
    a, x = _data(5)
    f_t = jax.linear_transpose(lambda x: k(a, x, outs=_like(x), backend=backend), x)
    (ct_x,) = f_t(np.ones(5, np.float32))
    np.testing.assert_allclose(ct_x, a, rtol=1e-6)


@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_grad_of_vmap_and_vmap_of_grad(name, backend):
    k = _mul_op(name)
    a, x = _data(3, 5)

    def loss(a, x):
        return (_mul_call(k, backend)(a, x) ** 2).sum()

    per_row = jax.vmap(jax.grad(loss, argnums=(0, 1)))(a, x)
    whole = jax.grad(lambda a, x: jax.vmap(loss)(a, x).sum(), argnums=(0, 1))(a, x)
    shared_a = jax.grad(lambda a, x: jax.vmap(loss, in_axes=(None, 0))(a, x).sum())(a[0], x)
    for ga, gx in (per_row, whole):
        np.testing.assert_allclose(ga, 2 * a * x * x, rtol=1e-5)
        np.testing.assert_allclose(gx, 2 * a * a * x, rtol=1e-5)
    np.testing.assert_allclose(shared_a, (2 * a[0] * x * x).sum(0), rtol=1e-5)


@pytest.mark.parametrize("backend", ["numba", "jax"])
@pytest.mark.parametrize("batched", [False, True])
def test_check_grads(name, backend, batched):
    k = _mul_op(name)
    with jax.enable_x64(True):
        a, x = _data(*((3, 4) if batched else (4,)), dtype=np.float64)
        f = _mul_call(k, backend)
        if batched:
            f = jax.vmap(f)
        check_grads(lambda a, x: jnp.sin(f(a, x)), (a, x), order=2, modes=("fwd", "rev"))


def test_rules_use_the_backend_of_the_call(name):
    # numba: 2 * x, "three": 3 * x; linear, so the derivative shows the backend.
    k = XLACustomKernel(name)
    k.def_numba_kernel(lambda outs: _times2)
    k.def_kernel("three", "cpu", lambda outs: lambda x: x * 3)
    k.def_jvp_rule2(lambda t, x, outs: k(t, outs=outs))
    k.def_transpose_rule(lambda cts, x, outs: [k(cts[0], outs=outs)])
    x = np.ones(3, np.float32)
    for backend, factor in [(None, 2), ("three", 3)]:
        f = lambda x, backend=backend: k(x, outs=_like(x), backend=backend)  # noqa: E731
        np.testing.assert_array_equal(jax.jvp(f, (x,), (x,))[1], factor * x)
        np.testing.assert_array_equal(jax.grad(lambda x, f=f: f(x).sum())(x), factor * x)
        np.testing.assert_array_equal(
            jax.vmap(jax.grad(lambda x, f=f: f(x).sum()))(x[None]), factor * x[None]
        )
    k.def_call(lambda x: k(x, outs=_like(x)))
    np.testing.assert_array_equal(jax.grad(lambda x: k.call(x, backend="three").sum())(x), 3 * x)


def _times_op(name):
    """numba: 2 * x, "three": 3 * x; linear, so a derivative shows the backend."""
    k = XLACustomKernel(name)
    k.def_numba_kernel(lambda outs: _times2)
    k.def_kernel("three", "cpu", lambda outs: lambda x: x * 3)
    return k


@pytest.mark.parametrize("form", ["keyword", "kwargs"])
def test_rules_get_the_backend_of_the_call(name, form):
    # As the seed's rules do: a rule taking `backend` (by name or **kwargs) gets
    # the backend of the call being transformed, and calls made with it use it.
    k = _times_op(name)
    seen = []

    if form == "keyword":

        def jvp(t, x, *, outs, backend):
            seen.append(("jvp", backend))
            return k(t, outs=outs, backend=backend)

        def transpose(cts, x, *, outs, backend):
            seen.append(("transpose", backend))
            return [k(cts[0], outs=outs, backend=backend)]

    else:

        def jvp(t, x, **kwargs):
            seen.append(("jvp", kwargs["backend"]))
            return k(t, **kwargs)

        def transpose(cts, x, **kwargs):
            seen.append(("transpose", kwargs["backend"]))
            return [k(cts[0], **kwargs)]

    k.def_jvp_rule2(jvp)
    k.def_transpose_rule(transpose)
    x = np.ones(3, np.float32)
    for backend, factor in [(None, 2), ("three", 3), ("numba", 2)]:
        seen.clear()

        def f(x, backend=backend):
            return k(x, outs=_like(x), backend=backend)

        np.testing.assert_array_equal(jax.jvp(f, (x,), (x,))[1], factor * x)
        np.testing.assert_array_equal(jax.grad(lambda x, f=f: f(x).sum())(x), factor * x)
        assert seen == [("jvp", backend), ("jvp", backend), ("transpose", backend)]
    # The backend forced by call() is the call's backend.
    seen.clear()
    k.def_call(lambda x: k(x, outs=_like(x)))
    np.testing.assert_array_equal(jax.grad(lambda x: k.call(x, backend="three").sum())(x), 3 * x)
    assert seen == [("jvp", "three"), ("transpose", "three")]


def test_full_jvp_rule_gets_the_backend_of_the_call(name):
    k = _times_op(name)
    seen = []

    @k.def_jvp_rule
    def jvp(primals, tangents, *, outs, backend):
        seen.append(backend)
        return k(*primals, outs=outs, backend=backend), k(*tangents, outs=outs, backend=backend)

    x = np.ones(3, np.float32)
    f = lambda x: k(x, outs=_like(x), backend="three")  # noqa: E731
    np.testing.assert_array_equal(jax.jvp(f, (x,), (x,))[1], 3 * x)
    # Batched calls run the rule per element, with the same backend.
    np.testing.assert_array_equal(
        jax.vmap(lambda x: jax.jvp(f, (x,), (x,))[1])(x[None]), 3 * x[None]
    )
    assert seen == ["three", "three"]


def test_rules_without_a_backend_keyword_do_not_get_it(name):
    # Rules written without `backend` (or **kwargs) keep working: nothing is passed.
    k = _times_op(name)
    k.def_jvp_rule2(lambda t, x, outs: k(t, outs=outs))
    k.def_transpose_rule(lambda cts, x, *, outs: [k(cts[0], outs=outs)])
    x = np.ones(3, np.float32)
    f = lambda x: k(x, outs=_like(x), backend="three")  # noqa: E731
    np.testing.assert_array_equal(jax.grad(lambda x: f(x).sum())(x), 3 * x)
