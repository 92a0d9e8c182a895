import re

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from xla_custom_kernel import BackendError, NoKernelError, XLACustomKernel


@numba.njit
def _checked_copy(x, out):
    if x[0] < 0:
        raise ValueError("x[0] must not be negative")
    for i in range(x.size):
        out[i] = x[i]


def _like(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


X = jnp.arange(4.0, dtype=jnp.float32)


def _switch(name, failed_platform, other):
    return (
        f"Other backends for {failed_platform}: {other!r}; switch with "
        f"xla_custom_kernel.get_kernel({name!r}).set_default({failed_platform!r}, {other!r}) "
        f"or pass backend={other!r} to the call"
    )


def _numba_and_jax_on_cpu(name):
    k = XLACustomKernel(name)
    k.def_numba_kernel(lambda outs: _checked_copy)
    k.def_jax_kernel(lambda outs: lambda x: x, platform="cpu")
    return k


@pytest.mark.parametrize(
    "lower",
    [
        lambda f, x: jax.jit(f).trace(x).lower(lowering_platforms=("cuda",)),
        lambda f, x: jax.jit(f).trace(x).lower(lowering_platforms=("rocm",)),
        lambda f, x: jax.export.export(jax.jit(f), platforms=["cuda"])(x),
    ],
    ids=["lower-cuda", "lower-rocm", "export-cuda"],
)
def test_no_kernel_for_platform(name, lower):
    k = _numba_and_jax_on_cpu(name)

    def f(x):
        return k(x, outs=_like(x))

    with pytest.raises(
        NoKernelError,
        match=re.escape(
            f"no kernel registered for platform 'gpu' in {name!r}; registered: cpu: numba, jax"
        ),
    ):
        lower(f, X)
    assert issubclass(NoKernelError, RuntimeError)


@pytest.mark.parametrize("jit", [False, True])
def test_no_kernel_at_all(name, jit):
    k = XLACustomKernel(name)

    def f(x):
        return k(x, outs=_like(x))

    with pytest.raises(
        NoKernelError,
        match=re.escape(f"no kernel registered for platform 'cpu' in {name!r}; registered: none"),
    ):
        (jax.jit(f) if jit else f)(X)


def test_generator_raising(name):
    def kg(outs):
        raise RuntimeError("cannot build this kernel")

    k = XLACustomKernel(name)
    k.def_kernel("fragile", "cpu", kg)
    k.def_jax_kernel(lambda outs: lambda x: x)
    with pytest.raises(
        BackendError,
        match=re.escape(
            f"backend 'fragile' of kernel {name!r} failed on platform 'cpu': RuntimeError: "
            f"cannot build this kernel. {_switch(name, 'cpu', 'jax')}"
        ),
    ):
        jax.jit(lambda x: k(x, outs=_like(x)))(X)
    assert issubclass(BackendError, RuntimeError)
    # The advice works.
    np.testing.assert_array_equal(k(X, outs=_like(X), backend="jax"), X)
    k.set_default("cpu", "jax")
    np.testing.assert_array_equal(jax.jit(lambda x: k(x, outs=_like(x)))(X), X)


def test_generator_raising_lists_every_other_backend(name):
    k = XLACustomKernel(name)
    k.def_kernel("a", "cpu", lambda outs: lambda x: x)
    k.def_kernel("fragile", "cpu", lambda outs: 1 / 0, asdefault=True)
    k.def_kernel("b", "cpu", lambda outs: lambda x: x)
    with pytest.raises(
        BackendError,
        match=re.escape(
            f"backend 'fragile' of kernel {name!r} failed on platform 'cpu': ZeroDivisionError: "
            f"division by zero. Other backends for cpu: 'a', 'b'; switch with "
            f"xla_custom_kernel.get_kernel({name!r}).set_default('cpu', 'a') "
            "or pass backend='a' to the call"
        ),
    ):
        k(X, outs=_like(X))


def test_switch_hint_keeps_the_case_of_names(name):
    name = "MixedCase_" + name
    k = XLACustomKernel(name)
    k.def_kernel("Fragile", "cpu", lambda outs: 1 / 0)
    k.def_kernel("Other", "cpu", lambda outs: lambda x: x)
    with pytest.raises(
        BackendError,
        match=re.escape(
            f"backend 'Fragile' of kernel {name!r} failed on platform 'cpu': ZeroDivisionError: "
            f"division by zero. {_switch(name, 'cpu', 'Other')}"
        ),
    ):
        k(X, outs=_like(X))


def test_generator_raising_without_alternative(name):
    k = XLACustomKernel(name)
    k.def_kernel("fragile", "cpu", lambda outs: 1 / 0)
    with pytest.raises(
        BackendError,
        match=re.escape(
            f"backend 'fragile' of kernel {name!r} failed on platform 'cpu': ZeroDivisionError: "
            "division by zero. No other backend is registered for cpu; register one, for example "
            f"with get_kernel({name!r}).def_jax_kernel(...)"
        ),
    ):
        k(X, outs=_like(X))


def test_generator_import_error_names_the_extra(name):
    pytest.importorskip("warp_ffi", reason="def_warp_kernel needs warp-ffi installed")

    def kg(outs):
        import warp_that_is_not_installed  # noqa: F401

    k = XLACustomKernel(name)
    k.def_warp_kernel(kg)
    k.def_jax_kernel(lambda outs: lambda x: x)
    with pytest.raises(
        BackendError,
        match=re.escape(
            f"backend 'warp' of kernel {name!r} failed on platform 'cpu': ModuleNotFoundError: "
            "No module named 'warp_that_is_not_installed' "
            '(install it with `pip install "xla-custom-kernel[warp]"` (from wheels built from '
            'the repository: `pip install --find-links DIR "xla-custom-kernel[warp]"`; in a uv '
            'project: `uv add "xla-custom-kernel[warp]"`)). '
            f"{_switch(name, 'cpu', 'jax')}"
        ),
    ):
        jax.jit(lambda x: k(x, outs=_like(x))).trace(X).lower()


def test_generator_returning_non_callable(name):
    k = XLACustomKernel(name)
    k.def_kernel("bad", "cpu", lambda outs: 3)
    k.def_jax_kernel(lambda outs: lambda x: x)
    with pytest.raises(
        BackendError,
        match=re.escape(
            f"backend 'bad' of kernel {name!r} failed on platform 'cpu': TypeError: the kernel "
            "generator returned <class 'int'>; it must return a callable taking the input arrays "
            f"and returning the outputs. {_switch(name, 'cpu', 'jax')}"
        ),
    ):
        k(X, outs=_like(X))


@pytest.mark.parametrize(
    ("fn", "got"),
    [
        (lambda x: x[:2], "float32[2]"),
        (lambda x: x.astype(jnp.int32), "int32[4]"),
        (lambda x: x.reshape(2, 2), "float32[2, 2]"),
    ],
    ids=["shape", "dtype", "rank"],
)
def test_backend_returning_wrong_shape_or_dtype(name, fn, got):
    k = XLACustomKernel(name)
    k.def_kernel("sloppy", "cpu", lambda outs: fn)
    k.def_jax_kernel(lambda outs: lambda x: x)
    with pytest.raises(
        BackendError,
        match=re.escape(
            f"backend 'sloppy' of kernel {name!r} failed on platform 'cpu': ValueError: backend "
            f"'sloppy' returned {got} for output 0; the call declared float32[4]. "
            f"{_switch(name, 'cpu', 'jax')}"
        ),
    ):
        jax.jit(lambda x: k(x, outs=_like(x)))(X)


def test_backend_returning_no_array(name):
    k = XLACustomKernel(name)
    k.def_kernel("forgetful", "cpu", lambda outs: lambda x: None)
    k.def_jax_kernel(lambda outs: lambda x: x)
    with pytest.raises(
        BackendError,
        match=re.escape(
            f"backend 'forgetful' of kernel {name!r} failed on platform 'cpu': TypeError: "
            "backend 'forgetful' returned <class 'NoneType'> for output 0, not an array; the "
            f"call declared float32[4]. {_switch(name, 'cpu', 'jax')}"
        ),
    ):
        jax.jit(lambda x: k(x, outs=_like(x)))(X)


@pytest.mark.parametrize(
    ("fn", "got"),
    [(lambda x: [x], "1 values"), (lambda x: (x, x, x), "3 values")],
    ids=["fewer", "more"],
)
def test_backend_returning_wrong_number_of_outputs(name, fn, got):
    k = XLACustomKernel(name)
    k.def_kernel("sloppy", "cpu", lambda outs: fn)
    k.def_jax_kernel(lambda outs: lambda x: (x, x))
    with pytest.raises(
        BackendError,
        match=re.escape(
            f"backend 'sloppy' of kernel {name!r} failed on platform 'cpu': ValueError: backend "
            f"'sloppy' must give 2 values (one per output), got {got}. "
            f"{_switch(name, 'cpu', 'jax')}"
        ),
    ):
        jax.jit(lambda x: k(x, outs=(_like(x), _like(x))))(X)


@pytest.mark.parametrize("jit", [False, True])
def test_numba_kernel_raising_at_run_time(name, jit):
    k = _numba_and_jax_on_cpu(name)

    def f(x):
        return k(x, outs=_like(x))

    g = jax.jit(f) if jit else f
    np.testing.assert_array_equal(g(X), X)
    # jax raises JaxRuntimeError or ValueError, depending on the dispatch path.
    with pytest.raises(
        Exception,
        match=re.escape(
            f"numba kernel '_checked_copy' (kernel {name!r}, backend 'numba' on cpu; "
            f"other backends for cpu: 'jax'; switch with "
            f"xla_custom_kernel.get_kernel({name!r}).set_default('cpu', 'jax') "
            "or pass backend='jax' to the call) raised ValueError: x[0] must not be negative"
        ),
    ):
        jax.block_until_ready(g(X - 1))
    # The operation keeps working, and the advice works.
    np.testing.assert_array_equal(g(X + 1), X + 1)
    np.testing.assert_array_equal(k(X - 1, outs=_like(X), backend="jax"), X - 1)
