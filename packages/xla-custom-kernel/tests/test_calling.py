import re

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
import xla_custom_kernel as xck
from xla_custom_kernel import UnknownBackendError, XLACustomKernel


@numba.njit
def _times2(x, out):
    for i in range(x.size):
        out.flat[i] = 2 * x.flat[i]


@numba.njit
def _sum_and_diff(x, y, s, d):
    for i in range(x.size):
        s[i] = x[i] + y[i]
        d[i] = x[i] - y[i]


def _scale_op(name):
    """numba: x * 2, jax: x * 3, "four": x * 4; different on purpose, so results
    show which backend ran."""
    k = XLACustomKernel(name)
    k.def_numba_kernel(lambda outs: _times2)
    k.def_jax_kernel(lambda outs: lambda x: x * 3)
    k.def_kernel("four", "cpu", lambda outs: lambda x: x * 4)
    return k


def _like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


X = jnp.arange(1.0, 5.0, dtype=jnp.float32)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize(("backend", "factor"), [(None, 2), ("numba", 2), ("jax", 3), ("four", 4)])
def test_single_output(name, jit, backend, factor):
    k = _scale_op(name)

    def f(x):
        return k(x, outs=_like(x), backend=backend)

    y = (jax.jit(f) if jit else f)(X)
    assert isinstance(y, jax.Array)
    np.testing.assert_array_equal(y, factor * X)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("backend", ["numba", "jax"])
@pytest.mark.parametrize("outs_type", [tuple, list])
def test_multiple_outputs_give_a_tuple(name, jit, backend, outs_type):
    k = XLACustomKernel(name)
    k.def_numba_kernel(lambda outs: _sum_and_diff)
    k.def_jax_kernel(lambda outs: lambda x, y: (x + y, x - y))
    y = jnp.ones(4, jnp.float32)

    def f(x, y):
        return k(x, y, outs=outs_type([_like(x), _like(x)]), backend=backend)

    res = (jax.jit(f) if jit else f)(X, y)
    assert isinstance(res, tuple)
    assert len(res) == 2
    np.testing.assert_array_equal(res[0], X + 1)
    np.testing.assert_array_equal(res[1], X - 1)


def test_one_output_in_a_sequence_gives_a_tuple(name):
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs: lambda x: [x + 1])
    (y,) = k(X, outs=[_like(X)])
    np.testing.assert_array_equal(y, X + 1)


def test_outputs_of_other_dtypes_and_numpy_inputs(name):
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs: lambda x: (x > 2, x.astype(jnp.int32)))
    outs = (jax.ShapeDtypeStruct((4,), np.bool_), jax.ShapeDtypeStruct((4,), np.int32))
    above, ints = jax.jit(lambda x: k(x, outs=outs))(np.asarray(X))
    assert above.dtype == jnp.bool_
    assert ints.dtype == jnp.int32
    np.testing.assert_array_equal(above, np.asarray(X) > 2)
    np.testing.assert_array_equal(ints, [1, 2, 3, 4])


def test_static_keywords_reach_the_generator(name):
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs, factor, shift=0.0: lambda x: x * factor + shift)
    np.testing.assert_array_equal(k(X, outs=_like(X), factor=5.0), 5 * X)
    np.testing.assert_array_equal(
        jax.jit(lambda x: k(x, outs=_like(x), factor=2.0, shift=1.0))(X), 2 * X + 1
    )


# What one output of `outs` may be, as the messages say it (ffi_core.bridge.normalize_outs).
OUTPUT_SPEC = (
    "an object with `shape` and `dtype` (a jax.ShapeDtypeStruct, a jax.core.ShapedArray, an array)"
)


@pytest.mark.parametrize(
    ("outs", "error", "message"),
    [
        (
            3,
            TypeError,
            f"`outs` must be {OUTPUT_SPEC} or a sequence or pytree of them, got <class 'int'>",
        ),
        (
            (jax.ShapeDtypeStruct((4,), jnp.float32), "f32"),
            TypeError,
            f"`outs[1]` must be {OUTPUT_SPEC}, got <class 'str'>",
        ),
        (
            {"a": jax.ShapeDtypeStruct((4,), jnp.float32), "b": "f32"},
            TypeError,
            f"`outs` must be {OUTPUT_SPEC} or a sequence or pytree of them, got a leaf of "
            "<class 'str'>",
        ),
        ((), ValueError, "`outs` must hold at least one jax.ShapeDtypeStruct, got none"),
        ([], ValueError, "`outs` must hold at least one jax.ShapeDtypeStruct, got none"),
        ({}, ValueError, "`outs` must hold at least one jax.ShapeDtypeStruct, got none"),
    ],
    ids=["int", "tuple-with-str", "dict-with-str", "empty-tuple", "empty-list", "empty-dict"],
)
def test_outs_validation(name, outs, error, message):
    k = _scale_op(name)
    with pytest.raises(error, match="^" + re.escape(message) + "$"):
        k(X, outs=outs)


def test_outs_may_be_arrays(name):
    k = _scale_op(name)
    np.testing.assert_array_equal(k(X, outs=X), 2 * X)


class _Spec:
    """Not JAX's: any object with `shape` and `dtype` describes an output."""

    shape = (4,)
    dtype = np.dtype(np.float32)


@pytest.mark.parametrize(
    "spec",
    [jax.ShapeDtypeStruct((4,), jnp.float32), jax.core.ShapedArray((4,), jnp.float32), X, _Spec()],
    ids=["ShapeDtypeStruct", "ShapedArray", "array", "shape-and-dtype"],
)
def test_outs_of_every_kind(name, spec):
    k = _scale_op(name)
    np.testing.assert_array_equal(jax.jit(lambda x: k(x, outs=spec))(X), 2 * X)
    (y,) = k(X, outs=[spec])
    np.testing.assert_array_equal(y, 2 * X)


def test_outs_as_a_pytree(name):
    k = XLACustomKernel(name)
    seen = []

    def kg(outs):
        seen.append(outs)
        return _sum_and_diff

    k.def_numba_kernel(kg)
    y = jnp.ones(4, jnp.float32)
    spec = jax.core.ShapedArray((4,), jnp.float32)
    out = jax.jit(lambda x, y: k(x, y, outs={"s": spec, "d": (spec,)}))(X, y)
    assert set(out) == {"s", "d"} and isinstance(out["d"], tuple)
    # Leaves in JAX's order: "d" before "s"; the generator gets them as a tuple.
    np.testing.assert_array_equal(out["d"][0], X + y)
    np.testing.assert_array_equal(out["s"], X - y)
    assert seen == [(jax.ShapeDtypeStruct((4,), jnp.float32),) * 2]


@pytest.mark.parametrize("value", [1.0, [1.0, 2.0], None])
def test_non_array_input(name, value):
    k = _scale_op(name)
    with pytest.raises(
        TypeError,
        match=re.escape(
            f"input 1 of kernel {name!r} must be an array (jax.Array or numpy.ndarray), "
            f"got {type(value)!r}; pass Python numbers as static keywords or wrap them with "
            "jnp.asarray"
        ),
    ):
        k(X, value, outs=_like(X))


def test_unhashable_static_keyword(name):
    k = _scale_op(name)
    with pytest.raises(
        TypeError,
        match=re.escape(
            f"static keyword 'sizes' of kernel {name!r} must be hashable (it is part of the "
            "compiled signature), got <class 'list'>; use a tuple instead of a list, or pass "
            "arrays as inputs"
        ),
    ):
        k(X, outs=_like(X), sizes=[1, 2])


def test_traced_static_keyword_says_what_to_do(name):
    k = _scale_op(name)
    end = (
        "; static keywords are part of the compiled signature and must be Python values known "
        "when tracing. Pass the array as an input, or make the value static in the caller "
        "(jax.jit(f, static_argnames=...), or a Python 'scale' not derived from a traced "
        "argument)"
    )
    with pytest.raises(TypeError) as info:
        jax.jit(lambda x, p: k(x, outs=_like(x), scale=p))(X, 2.0)
    assert str(info.value).startswith(
        f"static keyword 'scale' of kernel {name!r} is a traced value: the caller is under a "
        "transformation such as jit ("
    )
    assert str(info.value).endswith(end)
    with pytest.raises(TypeError) as info:
        k(X, outs=_like(X), scale=jnp.float32(2))
    assert str(info.value).startswith(f"static keyword 'scale' of kernel {name!r} is a JAX array (")
    assert str(info.value).endswith(end)


def test_unknown_backend_per_call(name):
    k = _scale_op(name)
    with pytest.raises(
        UnknownBackendError,
        match=re.escape(
            f"unknown backend 'warp' for kernel {name!r}; registered: "
            "cpu: numba, jax, four; gpu: jax; tpu: jax"
        ),
    ):
        k(X, outs=_like(X), backend="warp")
    with pytest.raises(
        TypeError, match=re.escape("`backend` must be a str or None, got <class 'int'>")
    ):
        k(X, outs=_like(X), backend=1)


def test_backend_registered_on_another_platform_only(name):
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs: lambda x: x, platform="cpu")
    k.def_kernel("gpu_only", "gpu", lambda outs: lambda x: x)
    # Accepted at the call (a GPU may run it), refused when lowered for CPU.
    with pytest.raises(
        UnknownBackendError,
        match=re.escape(
            f"unknown backend 'gpu_only' for platform 'cpu' of kernel {name!r}; "
            "registered for cpu: 'jax'"
        ),
    ):
        jax.jit(lambda x: k(x, outs=_like(x), backend="gpu_only"))(X)


def test_set_default_switches_an_already_jitted_function(name):
    k = _scale_op(name)
    f = jax.jit(lambda x: k(x, outs=_like(x)))
    np.testing.assert_array_equal(f(X), 2 * X)
    k.set_default("cpu", "jax")
    np.testing.assert_array_equal(f(X), 3 * X)
    k.set_default("cpu", "four")
    np.testing.assert_array_equal(f(X), 4 * X)
    k.set_default("cpu", "numba")
    np.testing.assert_array_equal(f(X), 2 * X)
    np.testing.assert_array_equal(k(X, outs=_like(X)), 2 * X)


def test_set_default_switches_eager_calls(name):
    k = _scale_op(name)
    np.testing.assert_array_equal(k(X, outs=_like(X)), 2 * X)
    k.set_default("cpu", "jax")
    np.testing.assert_array_equal(k(X, outs=_like(X)), 3 * X)


def test_set_backend_is_process_wide(name):
    a = _scale_op(name + "_a")
    b = XLACustomKernel(name + "_b")  # no "jax" backend: keeps its default
    b.def_kernel("only", "cpu", lambda outs: lambda x: x + 100)
    f = jax.jit(lambda x: (a(x, outs=_like(x)), b(x, outs=_like(x))))
    assert xck.get_backend() is None
    try:
        np.testing.assert_array_equal(f(X)[0], 2 * X)
        xck.set_backend("jax")
        assert xck.get_backend() == "jax"
        assert a.get_backend() == "jax"  # the same functions, on the class too
        ya, yb = f(X)
        np.testing.assert_array_equal(ya, 3 * X)
        np.testing.assert_array_equal(yb, X + 100)
        # The preference does not change the defaults, and loses to backend=.
        assert a.get_default("cpu") == "numba"
        np.testing.assert_array_equal(a(X, outs=_like(X), backend="four"), 4 * X)
        a.set_backend("four")
        np.testing.assert_array_equal(f(X)[0], 4 * X)
    finally:
        xck.set_backend(None)
    assert xck.get_backend() is None
    np.testing.assert_array_equal(f(X)[0], 2 * X)


def test_set_backend_type():
    with pytest.raises(
        TypeError, match=re.escape("`backend` must be a str or None, got <class 'int'>")
    ):
        xck.set_backend(3)
    assert xck.get_backend() is None


def test_def_call_and_call(name):
    k = _scale_op(name)
    assert not k.has_call

    @k.def_call
    def scale(x, *, plus=0.0):
        return k(x, outs=_like(x)) + plus

    assert k.has_call
    np.testing.assert_array_equal(k.call(X), 2 * X)
    np.testing.assert_array_equal(k.call(X, plus=1.0), 2 * X + 1)
    np.testing.assert_array_equal(jax.jit(k.call)(X), 2 * X)


@pytest.mark.parametrize(("backend", "factor"), [("numba", 2), ("jax", 3), ("four", 4)])
def test_call_backend_reaches_the_kernel_calls_inside(name, backend, factor):
    k = _scale_op(name)
    k.def_call(lambda x: k(x, outs=_like(x)) + k(x, outs=_like(x)))
    np.testing.assert_array_equal(k.call(X, backend=backend), 2 * factor * X)
    np.testing.assert_array_equal(jax.jit(lambda x: k.call(x, backend=backend))(X), 2 * factor * X)
    # Only inside that call: the next one uses the default again.
    np.testing.assert_array_equal(k.call(X), 4 * X)


@pytest.mark.parametrize("form", ["keyword", "kwargs"])
def test_call_passes_backend_to_a_function_taking_it(name, form):
    # As the seed API's call(): the call function gets the `backend` it was given.
    k = _scale_op(name)
    seen = []
    if form == "keyword":

        def fn(x, *, backend=None):
            seen.append(backend)
            return k(x, outs=_like(x), backend=backend)

    else:

        def fn(x, **kwargs):
            seen.append(kwargs.get("backend"))
            return k(x, outs=_like(x), **kwargs)

    k.def_call(fn)
    np.testing.assert_array_equal(k.call(X, backend="four"), 4 * X)
    np.testing.assert_array_equal(k.call(X), 2 * X)
    assert seen == ["four", None]


def test_call_backend_loses_to_backend_of_the_kernel_call(name):
    k = _scale_op(name)
    k.def_call(lambda x: k(x, outs=_like(x), backend="four"))
    np.testing.assert_array_equal(k.call(X, backend="jax"), 4 * X)


def test_call_without_call_function(name):
    k = _scale_op(name)
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"kernel {name!r} has no call function; register one with @{name}.def_call "
            "(a function of the inputs that calls the kernel with its outs)"
        ),
    ):
        k.call(X)


def test_call_backend_type(name):
    k = _scale_op(name)
    k.def_call(lambda x: k(x, outs=_like(x)))
    with pytest.raises(
        TypeError, match=re.escape("`backend` must be a str or None, got <class 'int'>")
    ):
        k.call(X, backend=2)


def test_generator_runs_once_per_signature(name):
    calls = []

    def kg(outs, factor=1.0):
        calls.append((outs.shape, str(outs.dtype), factor))
        return lambda x: (x * factor).astype(x.dtype)

    k = XLACustomKernel(name)
    k.def_kernel("a", "cpu", kg)
    k.def_kernel("b", "cpu", kg)

    def f(x, factor=1.0, backend=None):
        return k(x, outs=_like(x), factor=factor, backend=backend)

    x64 = jnp.arange(6.0, dtype=jnp.float32)
    for _ in range(3):
        f(X)
        jax.jit(f, static_argnums=(1, 2))(X, 1.0, None)
        jax.jit(lambda x: f(x) + 1)(X)  # another jitted program, same signature
    assert calls == [((4,), "float32", 1.0)]
    f(X, 2.0)
    f(X, 2.0)
    f(x64)
    f(x64)
    f(X.astype(jnp.int32))
    f(X, backend="b")
    f(X, backend="b")
    assert calls == [
        ((4,), "float32", 1.0),
        ((4,), "float32", 2.0),
        ((6,), "float32", 1.0),
        ((4,), "int32", 1.0),
        ((4,), "float32", 1.0),
    ]


def test_generator_cache_survives_switching(name):
    calls = []

    def kg(outs, factor):
        calls.append(factor)
        return lambda x: x * factor

    k = XLACustomKernel(name)
    k.def_kernel("a", "cpu", lambda outs, factor: kg(outs, factor))
    k.def_kernel("b", "cpu", lambda outs, factor: kg(outs, -factor))
    f = jax.jit(lambda x: k(x, outs=_like(x), factor=2.0))
    np.testing.assert_array_equal(f(X), 2 * X)
    k.set_default("cpu", "b")
    np.testing.assert_array_equal(f(X), -2 * X)
    k.set_default("cpu", "a")
    np.testing.assert_array_equal(f(X), 2 * X)
    assert calls == [2.0, -2.0]
