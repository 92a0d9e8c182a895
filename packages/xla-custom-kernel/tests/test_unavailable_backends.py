"""Backends whose bridge package is not installed: registered, shown as
unavailable, and an ImportError naming the extra only where they would run."""

import re
import warnings

import jax
import jax.numpy as jnp
import pytest
import xla_custom_kernel as xck
from xla_custom_kernel import BackendAdapter, BackendPreferenceWarning, XLACustomKernel

X = jnp.arange(3.0)
OUT = jax.ShapeDtypeStruct(X.shape, X.dtype)


def _never(**kwargs):
    raise AssertionError("the generator of a backend that is not installed ran")


@pytest.fixture
def absent(name):
    # An adapter whose bridge package does not exist, registered on cpu and gpu.
    backend = re.sub(r"\W", "_", f"absent_{name}")
    xck.register_backend_adapter(
        BackendAdapter(backend, ("cpu", "gpu"), "vmap", extra="absent", module=f"{backend}_ffi")
    )
    return backend


def _reason(backend):
    return (
        f"{backend.replace('_', '-')}-ffi is not installed; install it with `pip install "
        '"xla-custom-kernel[absent]"` (from wheels built from the repository: '
        '`pip install --find-links DIR "xla-custom-kernel[absent]"`; in a uv project: `uv add "xla-custom-kernel[absent]"`)'
    )


def _import_error(backend, kernel, why):
    return (
        f"backend {backend!r} of kernel {kernel!r} ({why}) needs "
        f"{backend.replace('_', '-')}-ffi, which is not installed; install it with `pip install "
        '"xla-custom-kernel[absent]"` (from wheels built from the repository: '
        '`pip install --find-links DIR "xla-custom-kernel[absent]"`; in a uv project: `uv add "xla-custom-kernel[absent]"`)'
    )


def _op(name, absent, *, first=True, asdefault=False):
    op = XLACustomKernel(name)
    if first:
        getattr(op, f"def_{absent}_kernel")(_never, asdefault)
    op.def_jax_kernel(lambda outs: lambda x: x + 1, platform="cpu")
    if not first:
        getattr(op, f"def_{absent}_kernel")(_never, asdefault)
    return op


def test_registered_but_unavailable(name, absent):
    op = _op(name, absent)
    assert op.available_backends("cpu") == ["jax"]
    assert op.available_backends("gpu") == []
    assert (
        op.unavailable_backends("cpu")
        == op.unavailable_backends("gpu")
        == {absent: _reason(absent)}
    )
    assert {p: list(e) for p, e in op._kernels.items()} == {"cpu": [absent, "jax"], "gpu": [absent]}
    package = absent.replace("_", "-") + "-ffi"
    assert repr(op) == (
        f"XLACustomKernel({name!r}; cpu: {absent} (unavailable: {package} is not installed), "
        f"jax; gpu: {absent} (unavailable: {package} is not installed))"
    )
    # The first registered is not installed: the first that is, is the default.
    assert op.get_default("cpu") == op.fixed_default("cpu") == "jax"
    assert op.defaults == {"cpu": "jax", "gpu": absent}
    assert jnp.array_equal(op(X, outs=OUT), X + 1)
    assert jnp.array_equal(jax.jit(lambda x: op(x, outs=OUT))(X), X + 1)


def test_chosen_for_the_call_it_raises_the_extras_import_error(name, absent):
    op = _op(name, absent)
    message = f"^{re.escape(_import_error(absent, name, 'chosen for the call'))}$"
    with pytest.raises(ImportError, match=message):
        op(X, outs=OUT, backend=absent)
    op.def_call(lambda x: op(x, outs=OUT))
    with pytest.raises(ImportError, match=message):
        op.call(X, backend=absent)


def test_made_the_default_it_raises_where_its_platform_is_lowered(name, absent):
    op = _op(name, absent, first=False, asdefault=True)
    assert op.get_default("cpu") == absent
    why = "the default of platform 'cpu'"
    message = f"^{re.escape(_import_error(absent, name, why))}"
    with pytest.raises(ImportError, match=message):
        op(X, outs=OUT)
    op.set_default("cpu", "jax")
    assert jnp.array_equal(op(X, outs=OUT), X + 1)
    op.set_default("cpu", absent)
    with pytest.raises(ImportError, match=message):
        jax.jit(lambda x: op(x, outs=OUT))(X)


def test_the_only_backend_raises_where_its_platform_is_lowered(name, absent):
    op = XLACustomKernel(name)
    getattr(op, f"def_{absent}_kernel")(_never)
    why = "the only backend registered for platform 'cpu'"
    with pytest.raises(ImportError, match=f"^{re.escape(_import_error(absent, name, why))}"):
        op(X, outs=OUT)
    other = re.sub(r"\W", "_", f"other_{name}")
    xck.register_backend_adapter(
        BackendAdapter(other, ("cpu",), "vmap", extra="absent", module=f"{other}_ffi")
    )
    getattr(op, f"def_{other}_kernel")(_never)
    why = "the first registered for platform 'cpu', where none is installed"
    with pytest.raises(ImportError, match=f"^{re.escape(_import_error(absent, name, why))}"):
        op(X, outs=OUT)


def test_a_preference_for_every_platform_passes_over_it(name, absent):
    op = _op(name, absent, first=False)
    xck.set_backend(absent)
    assert jnp.array_equal(op(X, outs=OUT), X + 1)


def test_a_preference_for_the_platform_warns_once_and_falls_back(name, absent):
    op = _op(name, absent, first=False)
    xck.set_backend("cpu", absent)
    try:
        message = (
            f"backend {absent!r}, preferred on platform 'cpu' with "
            f"xla_custom_kernel.set_backend('cpu', {absent!r}), cannot run ({_reason(absent)}) "
            f"for kernel {name!r}; ignoring it there and using the kernel's default ('jax')"
        )
        with pytest.warns(BackendPreferenceWarning, match=f"^{re.escape(message)}$"):
            assert jnp.array_equal(op(X, outs=OUT), X + 1)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert jnp.array_equal(op(X + 1, outs=OUT), X + 2)  # warned once
        xck.set_backend("cpu", "numba")
        message = (
            "backend 'numba', preferred on platform 'cpu' with "
            "xla_custom_kernel.set_backend('cpu', 'numba'), is not registered for kernel "
            f"{name!r}; ignoring it there and using the kernel's default ('jax')"
        )
        with pytest.warns(BackendPreferenceWarning, match=f"^{re.escape(message)}$"):
            assert jnp.array_equal(op(X, outs=OUT), X + 1)
        assert issubclass(BackendPreferenceWarning, UserWarning)
    finally:
        xck.clear_backends()


def test_set_backend_per_platform():
    assert xck.get_backend("cpu") is None
    xck.set_backend("jax")
    xck.set_backend("gpu", "warp")
    assert (xck.get_backend(), xck.get_backend("gpu"), xck.get_backend("cpu")) == (
        "jax",
        "warp",
        "jax",
    )
    xck.set_backend("gpu", None)
    assert xck.get_backend("gpu") == "jax"
    xck.set_backend("cpu", "numba")
    xck.clear_backends()
    assert (xck.get_backend(), xck.get_backend("cpu")) == (None, None)


def test_a_preference_for_the_platform_comes_first(name):
    op = XLACustomKernel(name)
    op.def_jax_kernel(lambda outs: lambda x: x + 1, platform="cpu")
    op.def_kernel("two", "cpu", lambda outs: lambda x: x + 2)
    op.def_kernel("three", "cpu", lambda outs: lambda x: x + 3)
    try:
        xck.set_backend("two")
        xck.set_backend("cpu", "three")
        assert jnp.array_equal(op(X, outs=OUT), X + 3)
        xck.set_backend("cpu", None)
        assert jnp.array_equal(op(X, outs=OUT), X + 2)
    finally:
        xck.clear_backends()


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (
            ("cpu",),
            ValueError,
            "`backend` 'cpu' is a platform name; set a platform's backend with set_backend('cpu', backend)",
        ),
        ((), TypeError, "set_backend takes (backend) or (platform, backend), got 0 arguments"),
        (
            ("cpu", "a", "b"),
            TypeError,
            "set_backend takes (backend) or (platform, backend), got 3 arguments",
        ),
        (("cuda", "warp"), ValueError, "`platform` must be one of 'cpu', 'gpu', 'tpu', got 'cuda'"),
        (("cpu", 3), TypeError, "`backend` must be a str or None, got <class 'int'>"),
        (("",), ValueError, "`backend` must be a backend's name or None, got ''"),
    ],
)
def test_set_backend_refuses_bad_arguments(args, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        xck.set_backend(*args)
    assert xck.get_backend() is None and xck.get_backend("cpu") is None


def test_seed_attributes_and_registry_functions(name):
    a = XLACustomKernel(name + "_a")
    b = XLACustomKernel(name + "_b")
    (entry,) = a.def_jax_kernel(lambda outs: lambda x: x, platform="cpu")
    a.def_tags(name + "_csr", name + "_binary")
    b.def_tags(name + "_csr")
    assert a._kernels["cpu"]["jax"] is entry
    assert entry.kernel_generator is entry.generator
    with pytest.raises(TypeError):
        a._kernels["gpu"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        a._kernels["cpu"]["numba"] = entry  # type: ignore[index]
    assert a._tags == {name + "_csr", name + "_binary"} and isinstance(a._tags, set)
    assert xck.get_primitives_by_tags({name + "_csr"}) == {name + "_a": a, name + "_b": b}
    assert xck.get_primitives_by_tags({name + "_csr", name + "_binary"}) == {name + "_a": a}
    assert xck.get_primitives_by_tags(name + "_binary") == {name + "_a": a}
    assert xck.get_primitives_by_tags({name + "_none"}) == {}
    registry = xck.get_registry()
    assert registry[name + "_a"] is a and registry is not xck.get_registry()
    names = xck.get_all_primitive_names()
    assert names == sorted(names) and {name + "_a", name + "_b"} <= set(names)
    message = "`tags` must be a str or an iterable of str, got a <class 'int'> in it"
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        xck.get_primitives_by_tags({1})


def _scaled_by(name):
    op = XLACustomKernel(name)
    op.def_jax_kernel(lambda outs: lambda a, x: a * x)
    op.def_jvp_rule2(xck.NOT_DIFFERENTIABLE, lambda t, a, x, outs: a * t)
    op.def_transpose_rule(lambda cts, a, x, outs: [None, a * cts[0]])
    return op


def test_not_differentiable_raises_where_that_input_is_differentiated(name):
    op = _scaled_by(name)
    a, x = jnp.full(3, 3.0), jnp.ones(3)

    def f(a, x):
        return op(a, x, outs=OUT).sum()

    assert jnp.array_equal(jax.grad(f, argnums=1)(a, x), a)
    assert jnp.array_equal(
        jax.vmap(jax.grad(f, argnums=1))(jnp.stack([a, a]), jnp.stack([x, x])), jnp.stack([a, a])
    )
    message = (
        f"input 0 (float32[3]) of kernel {name!r} is not differentiable (def_jvp_rule2 gave "
        "xla_custom_kernel.NOT_DIFFERENTIABLE for it), but a derivative with respect to it was "
        "asked for; differentiate with respect to the other inputs only, or pass this one "
        "through jax.lax.stop_gradient"
    )
    with pytest.raises(NotImplementedError, match=f"^{re.escape(message)}"):
        jax.grad(f, argnums=0)(a, x)
    with pytest.raises(NotImplementedError, match=f"^{re.escape(message)}"):
        jax.vmap(jax.grad(f, argnums=0))(jnp.stack([a, a]), jnp.stack([x, x]))
    assert jnp.array_equal(
        jax.grad(lambda a, x: f(jax.lax.stop_gradient(a), x))(a, x), jnp.zeros(3)
    )
    assert repr(xck.NOT_DIFFERENTIABLE) == "xla_custom_kernel.NOT_DIFFERENTIABLE"


def test_none_is_a_zero_derivative(name):
    # As in the seed API: grad with respect to that input is zero, whatever
    # the true derivative.
    op = XLACustomKernel(name)
    op.def_jax_kernel(lambda outs: lambda a, x: a * x)
    op.def_jvp_rule2(None, lambda t, a, x, outs: a * t)
    grad = jax.grad(lambda a, x: op(a, x, outs=OUT).sum())(jnp.full(3, 3.0), jnp.ones(3))
    assert jnp.array_equal(grad, jnp.zeros(3))


def test_an_exported_step_naming_it_raises_the_extras_import_error(name, absent):
    from xla_custom_kernel import _export

    op = _op(name, absent)
    step = {"op": name, "platform": "cpu", "backend": absent, "outs": [[[3], "float32"]]}
    why = "recorded in the exported program"
    with pytest.raises(ImportError, match=f"^{re.escape(_import_error(absent, name, why))}$"):
        _export._rebuild({**step, "multiple": False, "static": []})
    assert op.available_backends("cpu") == ["jax"]
