"""ffi_core.testing: the helpers the packages' tests share pass what they
should and fail what they should."""

from __future__ import annotations

import os
import re

import jax
import jax.numpy as jnp
import pytest
from ffi_core.bridge import raise_on_differentiation
from ffi_core.bridge.cuda.testing import EmulatedGPU, emulated_gpu_fixture
from ffi_core.testing import (
    DIFFERENTIATION_TRANSFORMS,
    BridgeUnderTest,
    cache_dir_fixture,
    check_differentiation_refused,
    conformance_tests,
    custom_calls,
    device_mesh,
    differentiation_refused_message,
    raises_exactly,
    whole_message,
)
from jax.extend.core import Primitive

_test_cache = cache_dir_fixture(
    "FFI_CORE_TEST_CACHE_A",
    "FFI_CORE_TEST_CACHE_B",
    scope="function",
    autouse=False,
    name="test_cache",
)
gpu = emulated_gpu_fixture(devices=2)
_SHARED = EmulatedGPU()
shared_gpu = emulated_gpu_fixture(_SHARED, name="shared_gpu")

# A primitive refusing differentiation as a bridge's does, for the checks below.
_double_p = Primitive("ffi_core_tests_testing_double")
_double_p.def_abstract_eval(lambda x, *, name: x)
raise_on_differentiation(_double_p, describe=lambda params: f"test kernel {params['name']!r}")


def _double(x):
    return _double_p.bind(x, name="double")


NOTE = (
    "\n--------------------\nFor simplicity, JAX has removed its internal frames from the traceback"
)


@pytest.mark.parametrize(
    ("message", "matches"),
    [
        ("got 1 (int)", True),
        ("got 1 (int)" + NOTE, True),
        ("got 1 (int).", False),
        ("so: got 1 (int)", False),
        ("got 1 (int)\n", False),
        ("got 1 (int)\nmore", False),
    ],
)
def test_whole_message(message, matches):
    assert bool(re.search(whole_message("got 1 (int)"), message)) is matches


def test_whole_message_escapes():
    assert re.search(whole_message("a.b (c)*"), "a.b (c)*")
    assert not re.search(whole_message("a.b"), "axb")


def test_raises_exactly():
    with raises_exactly(ValueError, "`n` must be positive, got -1"):
        raise ValueError("`n` must be positive, got -1")
    with pytest.raises(AssertionError, match="Regex pattern did not match"):
        with raises_exactly(ValueError, "`n` must be positive"):
            raise ValueError("`n` must be positive, got -1")
    with pytest.raises(TypeError, match=r"^nope$"):
        with raises_exactly(ValueError, "nope"):
            raise TypeError("nope")


@pytest.mark.parametrize("transform", DIFFERENTIATION_TRANSFORMS)
def test_check_differentiation_refused(transform):
    check_differentiation_refused(
        _double, jnp.ones(3), kernel="test kernel 'double'", transform=transform
    )
    with pytest.raises(AssertionError, match="Regex pattern did not match"):
        check_differentiation_refused(
            _double, jnp.ones(3), kernel="test kernel 'other'", transform=transform
        )


def test_check_differentiation_refused_fails_a_differentiable_op():
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        check_differentiation_refused(jnp.sin, jnp.ones(3), kernel="sin", transform="grad")


def test_check_differentiation_refused_refuses_an_unknown_transform():
    with raises_exactly(
        ValueError,
        "`transform` must be one of grad, jvp, vjp, linear_transpose, got 'hessian'",
    ):
        check_differentiation_refused(_double, jnp.ones(3), kernel="k", transform="hessian")


def test_cache_dir_fixture(test_cache):
    assert set(test_cache) == {"FFI_CORE_TEST_CACHE_A", "FFI_CORE_TEST_CACHE_B"}
    a, b = test_cache.values()
    assert a != b and a.is_dir() and b.is_dir() and not any(a.iterdir())
    assert os.environ["FFI_CORE_TEST_CACHE_A"] == str(a)
    assert os.environ["FFI_CORE_TEST_CACHE_B"] == str(b)


def test_cache_dir_fixture_restores_the_environment():
    # Function-scoped and not autouse: outside the tests that ask, unset.
    assert "FFI_CORE_TEST_CACHE_A" not in os.environ


def test_cache_dir_fixture_needs_a_variable():
    with raises_exactly(
        ValueError, "`env_vars` must name at least one environment variable, got none"
    ):
        cache_dir_fixture()


def _plain_op(outs, **options):
    # A function that conforms to nothing: no docstring, no checks, a derivative.
    def scale(x, **scalars):
        return 2 * x

    return scale


_PLAIN = BridgeUnderTest(
    kernel="plain kernel 'scale'",
    make=_plain_op,
    compile_error=ValueError,
    vmap_methods=("sequential",),
    dtypes_kernels="plain kernels",
    supported_dtypes=("float32",),
    cache_env="FFI_CORE_TEST_CACHE_C",
)


def test_conformance_tests_hold_the_checks_that_apply():
    full = [name for name in dir(conformance_tests(_PLAIN)) if name.startswith("test_")]
    assert full == [
        "test_cache_is_kept_out_of_the_user_s",
        "test_compile_error_is_every_bridge_s",
        "test_differentiation_names_the_fix",
        "test_differentiation_under_vmap_names_the_fix",
        "test_dtype_messages",
        "test_linear_transpose_of_a_sharded_call_names_the_fix",
        "test_op_is_named_after_the_kernel",
        "test_unknown_vmap_method_is_refused",
        "test_vmap_methods_are_the_kit_s",
    ]
    least = BridgeUnderTest(
        kernel="plain kernel 'scale'",
        make=_plain_op,
        compile_error=ValueError,
        differentiable=True,
    )
    assert [name for name in dir(conformance_tests(least)) if name.startswith("test_")] == [
        "test_compile_error_is_every_bridge_s",
        "test_op_is_named_after_the_kernel",
        "test_unknown_vmap_method_is_refused",
    ]


def test_conformance_tests_fail_a_bridge_that_does_not_conform(monkeypatch, tmp_path_factory):
    suite = conformance_tests(_PLAIN)()
    with pytest.raises(AssertionError):
        suite.test_op_is_named_after_the_kernel()
    with pytest.raises(AssertionError):
        suite.test_compile_error_is_every_bridge_s()
    with pytest.raises(AssertionError):
        suite.test_vmap_methods_are_the_kit_s()
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        suite.test_unknown_vmap_method_is_refused("loop")
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        suite.test_dtype_messages()
    for transform in DIFFERENTIATION_TRANSFORMS:
        with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
            suite.test_differentiation_names_the_fix("cpu", transform)
        with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
            suite.test_differentiation_under_vmap_names_the_fix("cpu", transform)
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"):
        suite.test_linear_transpose_of_a_sharded_call_names_the_fix("cpu")
    monkeypatch.delenv("FFI_CORE_TEST_CACHE_C", raising=False)
    with raises_exactly(
        AssertionError,
        "$FFI_CORE_TEST_CACHE_C is not set: the tests would fill the user's cache; point it at "
        "a temporary folder with ffi_core.testing.cache_dir_fixture in a conftest.py",
    ):
        suite.test_cache_is_kept_out_of_the_user_s(tmp_path_factory)
    monkeypatch.setenv("FFI_CORE_TEST_CACHE_C", os.path.expanduser("~/.cache/plain"))
    with pytest.raises(AssertionError):
        suite.test_cache_is_kept_out_of_the_user_s(tmp_path_factory)
    monkeypatch.setenv("FFI_CORE_TEST_CACHE_C", str(tmp_path_factory.mktemp("plain")))
    suite.test_cache_is_kept_out_of_the_user_s(tmp_path_factory)


def test_conformance_tests_need_a_bridge():
    with raises_exactly(TypeError, "`bridge` must be a BridgeUnderTest, got dict"):
        conformance_tests({})


def test_emulated_gpu_fixture(gpu):
    assert isinstance(gpu, EmulatedGPU)
    assert len(gpu.devices) == 2
    assert jax.config.jax_default_device == jax.devices("cpu")[0]


def test_differentiation_refused_message():
    fix = "define the derivative by wrapping the operation in `jax.custom_vjp`/`jax.custom_jvp`"
    jvp = f"k has no JVP rule, so jax.grad, jax.jvp and jax.vjp cannot differentiate it; {fix}"
    for transform in ("grad", "jvp", "vjp"):
        assert differentiation_refused_message("k", transform) == jvp
    assert differentiation_refused_message("k", "linear_transpose") == (
        f"k has no transpose rule, so jax.linear_transpose cannot transpose it; {fix}"
    )
    with raises_exactly(
        ValueError, "`transform` must be one of grad, jvp, vjp, linear_transpose, got 'jacfwd'"
    ):
        differentiation_refused_message("k", "jacfwd")


def test_differentiation_refused_message_with_a_bridge_s_fix():
    fix = "define the derivative with `toy.def_jvp` or wrap the operation in `jax.custom_vjp`"
    assert differentiation_refused_message("k", "vjp", fix) == (
        f"k has no JVP rule, so jax.grad, jax.jvp and jax.vjp cannot differentiate it; {fix}"
    )
    assert differentiation_refused_message("k", "linear_transpose", fix) == (
        f"k has no transpose rule, so jax.linear_transpose cannot transpose it; {fix}"
    )


def test_emulated_gpu_fixture_shares_a_given_gpu(shared_gpu):
    assert shared_gpu is _SHARED


def test_emulated_gpu_fixture_takes_a_gpu_or_options():
    with raises_exactly(
        ValueError,
        "pass `gpu` or EmulatedGPU's options ['devices'], not both: the options are for a "
        "fresh GPU per test",
    ):
        emulated_gpu_fixture(_SHARED, devices=2)


def test_device_mesh():
    # CPU devices whatever JAX's default backend is (a GPU machine has one GPU).
    count = len(jax.devices("cpu"))
    mesh = device_mesh((count,), ("d",))
    assert mesh.devices.tolist() == jax.devices("cpu") and mesh.axis_names == ("d",)
    with raises_exactly(
        ValueError,
        f"a mesh of shape ({count + 1},) needs {count + 1} devices, but JAX has {count} CPU "
        "devices; "
        f"run with XLA_FLAGS=--xla_force_host_platform_device_count={count + 1}",
    ):
        device_mesh((count + 1,), ("d",))


def test_custom_calls():
    hlo = "\n".join(
        [
            'a = f32[4] custom-call(x), custom_call_target="numba_cpu.add_0"',
            'b = f32[4] custom-call(a), custom_call_target="warp.add_1"',
            "c = f32[4] add(a, b)",
        ]
    )
    assert custom_calls(hlo, "numba_cpu.") == [hlo.splitlines()[0]]
    assert custom_calls(hlo, "warp") == [hlo.splitlines()[1]]
    assert custom_calls(hlo, "triton") == []
