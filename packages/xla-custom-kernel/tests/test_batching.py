import re

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
import xla_custom_kernel as xck
from xla_custom_kernel import XLACustomKernel


@numba.njit
def _axpy(a, x, y, out):
    for i in range(x.size):
        out[i] = a[0] * x[i] + y[i]


@numba.njit
def _sum_and_diff(x, y, s, d):
    for i in range(x.size):
        s[i] = x[i] + y[i]
        d[i] = x[i] - y[i]


def _axpy_op(name, **numba_options):
    k = XLACustomKernel(name)
    if numba_options:
        k.def_kernel("numba", "cpu", lambda outs: _axpy_callable(outs), **numba_options)
    else:
        k.def_numba_kernel(lambda outs: _axpy)
    k.def_jax_kernel(lambda outs: lambda a, x, y: a[0] * x + y)
    return k


def _axpy_callable(outs):
    from numba_cpu_ffi import numba_kernel

    return numba_kernel(_axpy, outs)


def _call(k, backend=None):
    def f(a, x, y):
        return k(a, x, y, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), backend=backend)

    return f


def _data(*batch, n=5):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((*batch, 1)).astype(np.float32)
    x = rng.standard_normal((*batch, n)).astype(np.float32)
    y = rng.standard_normal((*batch, n)).astype(np.float32)
    return a, x, y


def _lowered(f, *args):
    return jax.jit(f).lower(*args).as_text()


@pytest.mark.parametrize(("backend", "n_custom_calls"), [("numba", 1), ("jax", 0)])
def test_vmap_is_one_call_for_the_batch(name, backend, n_custom_calls):
    k = _axpy_op(name)
    f = jax.vmap(_call(k, backend))
    a, x, y = _data(3)
    text = _lowered(f, a, x, y)
    assert text.count("custom_call") == n_custom_calls
    assert "stablehlo.while" not in text
    np.testing.assert_allclose(jax.jit(f)(a, x, y), a * x + y, rtol=1e-6)
    np.testing.assert_allclose(f(a, x, y), a * x + y, rtol=1e-6)


@pytest.mark.parametrize(("backend", "n_custom_calls"), [("numba", 1), ("jax", 0)])
def test_nested_vmap(name, backend, n_custom_calls):
    k = _axpy_op(name)
    f = jax.vmap(jax.vmap(_call(k, backend)))
    a, x, y = _data(2, 3)
    text = _lowered(f, a, x, y)
    assert text.count("custom_call") == n_custom_calls
    assert "stablehlo.while" not in text
    np.testing.assert_allclose(jax.jit(f)(a, x, y), a * x + y, rtol=1e-6)


@pytest.mark.parametrize("backend", ["numba", "jax"])
@pytest.mark.parametrize(
    ("in_axes", "shapes", "expected"),
    [
        # a shared, x batched along axis 1, y shared.
        ((None, 1, None), ((1,), (5, 3), (5,)), lambda a, x, y: a * x.T + y),
        # a batched along axis 1, x shared, y batched along axis 0.
        ((1, None, 0), ((1, 3), (5,), (3, 5)), lambda a, x, y: a.T * x + y),
        # only y batched.
        ((None, None, 0), ((1,), (5,), (3, 5)), lambda a, x, y: a * x + y),
    ],
    ids=["x-axis-1", "a-axis-1-y-axis-0", "y-only"],
)
def test_vmap_in_axes(name, backend, in_axes, shapes, expected):
    k = _axpy_op(name)
    rng = np.random.default_rng(1)
    a, x, y = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    f = jax.vmap(_call(k, backend), in_axes=in_axes)
    np.testing.assert_allclose(jax.jit(f)(a, x, y), expected(a, x, y), rtol=1e-6)
    assert _lowered(f, a, x, y).count("custom_call") == (backend == "numba")


@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_nested_vmap_with_different_in_axes(name, backend):
    k = _axpy_op(name)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 1)).astype(np.float32)  # outer level only
    x = rng.standard_normal((5, 3)).astype(np.float32)  # inner level, axis 1
    y = rng.standard_normal((2, 3, 5)).astype(np.float32)  # both levels
    inner = jax.vmap(_call(k, backend), in_axes=(None, 1, 0))
    f = jax.vmap(inner, in_axes=(0, None, 0))
    expected = a[:, None, :] * x.T[None] + y
    np.testing.assert_allclose(jax.jit(f)(a, x, y), expected, rtol=1e-6)


@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_vmap_multiple_outputs(name, backend):
    k = XLACustomKernel(name)
    k.def_numba_kernel(lambda outs: _sum_and_diff)
    k.def_jax_kernel(lambda outs: lambda x, y: (x + y, x - y))

    def f(x, y):
        like = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return k(x, y, outs=(like, like), backend=backend)

    _, x, y = _data(3)
    s, d = jax.jit(jax.vmap(f, in_axes=(0, None)))(x, y[0])
    np.testing.assert_allclose(s, x + y[0])
    np.testing.assert_allclose(d, x - y[0])


def test_batching_loop_is_one_call_per_element_in_one_loop(name):
    k = _axpy_op(name, batching="loop")
    f = jax.vmap(_call(k))
    a, x, y = _data(4)
    text = _lowered(f, a, x, y)
    assert "stablehlo.while" in text
    assert text.count("custom_call") == 1  # in the loop body
    np.testing.assert_allclose(jax.jit(f)(a, x, y), a * x + y, rtol=1e-6)
    g = jax.vmap(jax.vmap(_call(k)), in_axes=(0, 0, None))
    a2, x2, y2 = _data(2, 3)
    np.testing.assert_allclose(jax.jit(g)(a2, x2, y2[0]), a2 * x2 + y2[0], rtol=1e-6)


def test_batching_vmap_of_a_numba_kernel_callable(name):
    k = _axpy_op(name, batching="vmap")
    f = jax.vmap(_call(k))
    a, x, y = _data(4)
    text = _lowered(f, a, x, y)
    assert "stablehlo.while" not in text
    assert text.count("custom_call") == 1
    np.testing.assert_allclose(jax.jit(f)(a, x, y), a * x + y, rtol=1e-6)


def _callback_op(name, batching):
    def kg(outs):
        # No vmap_method: jax cannot vmap this callable.
        return lambda x: jax.pure_callback(lambda v: np.asarray(v) * 2, outs, x)

    k = XLACustomKernel(name)
    k.def_kernel("callback", "cpu", kg, batching=batching)
    return k


def test_auto_falls_back_to_a_loop_for_an_unvmappable_callable(name):
    k = _callback_op(name, "auto")

    def f(x):
        return k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))

    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    assert "stablehlo.while" in _lowered(jax.vmap(f), x)
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(x), 2 * x)
    np.testing.assert_array_equal(jax.vmap(f)(x), 2 * x)


def test_auto_vmaps_a_vmappable_callable(name):
    k = XLACustomKernel(name)
    k.def_kernel("jnp", "cpu", lambda outs: lambda x: x * 2)  # batching="auto"

    def f(x):
        return k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))

    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    assert "stablehlo.while" not in _lowered(jax.vmap(f), x)
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(x), 2 * x)


def test_batching_vmap_of_an_unvmappable_callable_fails(name):
    k = _callback_op(name, "vmap")

    def f(x):
        return k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))

    with pytest.raises(Exception, match=f"backend 'callback' of kernel '{name}' failed"):
        jax.jit(jax.vmap(f))(np.ones((3, 4), np.float32))


def test_switching_backend_of_a_jitted_vmap(name):
    k = XLACustomKernel(name)
    k.def_kernel("loop", "cpu", lambda outs: lambda x: x * 2, batching="loop")
    k.def_jax_kernel(lambda outs: lambda x: x * 3)

    def f(x):
        return k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))

    g = jax.jit(jax.vmap(f))
    x = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(g(x), 2 * x)
    k.set_default("cpu", "jax")
    np.testing.assert_array_equal(g(x), 3 * x)


def test_custom_batching_rule(name):
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs, factor: lambda x: x * factor)
    k.def_kernel("other", "cpu", lambda outs, factor: lambda x: x * factor * 10)
    seen = []

    @k.def_batching_rule
    def rule(args, dims, *, outs, factor):
        (x,), (d,) = args, dims
        seen.append((outs.shape, d, factor))
        x = jnp.moveaxis(x, d, 0)
        # The kernel on the whole batch; + 1 shows that this rule ran.
        y = k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), factor=factor) + 1
        return [y], [0]

    def f(x, backend=None):
        return k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), factor=2.0, backend=backend)

    x = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(jax.jit(jax.vmap(f, in_axes=1))(x), 2 * x.T + 1)
    assert seen == [((4,), 1, 2.0)]
    # Calls of the kernel inside the rule use the backend of the call batched.
    np.testing.assert_array_equal(jax.vmap(lambda x: f(x, backend="other"))(x), 20 * x + 1)
    # The kernel call the rule makes is batched by the rule again at the next level.
    np.testing.assert_array_equal(jax.vmap(jax.vmap(f))(x[None]), 2 * x[None] + 2)

    k.register_general_batching()
    seen.clear()
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(x), 2 * x)
    assert seen == []


def test_custom_batching_rule_returning_not_implemented(name):
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs: lambda x: x * 2)

    @k.def_batching_rule
    def rule(args, dims, *, outs):
        if dims[0] != 0:
            return NotImplemented
        return [args[0] * 2 + 1], [0]

    def f(x):
        return k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))

    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(jax.vmap(f)(x), 2 * x + 1)
    np.testing.assert_array_equal(jax.vmap(f, in_axes=1)(x), 2 * x.T)
    # The default rule's batched call, batched again, goes to the default rule too.
    np.testing.assert_array_equal(jax.vmap(jax.vmap(f, in_axes=1))(x[None]), 2 * x.T[None])


def test_module_level_general_batching_rule_from_a_custom_rule(name):
    # The seed API's module-level form: a rule of one's own falls back to it.
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs, factor: lambda x: x * factor)

    @k.def_batching_rule
    def rule(args, dims, *, outs, factor):
        if dims[0] == 0:
            return xck.general_batching_rule(k, args, dims, outs=outs, factor=factor)
        return [jnp.moveaxis(args[0], dims[0], 0) * factor + 1], [0]

    def f(x):
        return k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), factor=2.0)

    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(jax.jit(jax.vmap(f))(x), 2 * x)
    np.testing.assert_array_equal(jax.vmap(f, in_axes=1)(x), 2 * x.T + 1)
    with pytest.raises(
        TypeError,
        match=re.escape("`kernel` must be an XLACustomKernel or the primitive of one, got 3"),
    ):
        xck.general_batching_rule(3, [x], [0], outs=jax.ShapeDtypeStruct((3,), jnp.float32))


def test_batching_rule_gets_the_backend_of_the_call(name):
    # As the seed's batching rules do; and general_batching_rule takes it back.
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs, factor: lambda x: x * factor)
    k.def_kernel("other", "cpu", lambda outs, factor: lambda x: x * factor * 10)
    seen = []

    @k.def_batching_rule
    def rule(args, dims, **kwargs):
        seen.append(kwargs["backend"])
        return xck.general_batching_rule(k, args, dims, **kwargs)

    def f(x, backend=None):
        return k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), factor=2.0, backend=backend)

    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(jax.vmap(f)(x), 2 * x)
    np.testing.assert_array_equal(jax.vmap(lambda x: f(x, backend="other"))(x), 20 * x)
    assert seen == [None, "other"]
    # The backend given to general_batching_rule picks the batched call's backend.
    out = xck.general_batching_rule(
        k, [x], [0], outs=jax.ShapeDtypeStruct((3,), jnp.float32), factor=2.0, backend="other"
    )
    np.testing.assert_array_equal(out[0][0], 20 * x)
    with pytest.raises(
        xck.UnknownBackendError,
        match=re.escape(f"unknown backend 'nope' for kernel {name!r}; registered: cpu: jax, other"),
    ):
        xck.general_batching_rule(
            k, [x], [0], outs=jax.ShapeDtypeStruct((3,), jnp.float32), factor=2.0, backend="nope"
        )
