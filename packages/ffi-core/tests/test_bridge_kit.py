"""What every bridge shares: the vmap methods and their check, the dtype
table, the compile-error base and the rules that refuse differentiation."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ffi_core import KernelCompileError
from ffi_core.bridge import (
    VMAP_METHODS,
    KernelDTypes,
    check_dtype,
    check_inputs,
    check_vmap_method,
    derivative_fix,
    output_avals,
    raise_on_differentiation,
)
from ffi_core.testing import differentiation_refused_message, raises_exactly
from jax.extend.core import Primitive
from jax.interpreters import mlir


def jvp_message(what: str) -> str:
    return differentiation_refused_message(what, "jvp")


def transpose_message(what: str) -> str:
    return differentiation_refused_message(what, "linear_transpose")


def test_vmap_methods():
    assert VMAP_METHODS == (
        None,
        "sequential",
        "sequential_unrolled",
        "expand_dims",
        "broadcast_all",
    )
    import ffi_core.bridge.cuda

    assert ffi_core.bridge.cuda.VMAP_METHODS is VMAP_METHODS


@pytest.mark.parametrize("method", VMAP_METHODS)
def test_check_vmap_method_accepts(method):
    check_vmap_method(method)


def test_check_vmap_method_refuses():
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`vmap_method` must be one of None, 'sequential', 'sequential_unrolled', "
            "'expand_dims', 'broadcast_all', got 'fold'"
        ),
    ):
        check_vmap_method("fold")


def test_check_vmap_method_extended():
    extended = (*VMAP_METHODS, "fold")
    check_vmap_method("fold", accepted=extended)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`vmap_method` must be one of None, 'sequential', 'sequential_unrolled', "
            "'expand_dims', 'broadcast_all', 'fold', got 'loop'"
        ),
    ):
        check_vmap_method("loop", accepted=extended)


TABLE = KernelDTypes(("int32", "float32"), "Triton kernels")


def test_dtype_table_check_dtype():
    assert check_dtype("float32", "`x`", accepted=TABLE) == np.float32
    with pytest.raises(
        TypeError,
        match=re.escape(
            "`x` has dtype float16, which Triton kernels do not take; supported: int32, float32"
        ),
    ):
        check_dtype("float16", "`x`", accepted=TABLE)


def test_dtype_table_outputs_and_inputs():
    with pytest.raises(
        TypeError,
        match=re.escape(
            "`outs` entry 0 (ShapeDtypeStruct(shape=(2,), dtype=float64)) has dtype float64, "
            "which Triton kernels do not take; supported: int32, float32"
        ),
    ):
        output_avals(jax.ShapeDtypeStruct((2,), jnp.float64), accepted=TABLE)
    with pytest.raises(
        TypeError,
        match=re.escape(
            "input 0 of kernel 'f' has dtype int8, which Triton kernels do not take; "
            "supported: int32, float32"
        ),
    ):
        check_inputs([np.zeros(2, np.int8)], [], [], name="kernel 'f'", accepted=TABLE)


def test_kernel_compile_error_is_a_type_error():
    assert issubclass(KernelCompileError, TypeError)


# A toy primitive: what a bridge has, with the refusing rules installed.
toy_p = Primitive("ffi_core_test_toy")
toy_p.def_abstract_eval(lambda x, *, name: x)
toy_p.def_impl(lambda x, *, name: x * 2)
mlir.register_lowering(toy_p, mlir.lower_fun(lambda x, *, name: x * 2, False))
raise_on_differentiation(toy_p, describe=lambda params: f"toy kernel {params['name']!r}")


def toy(x):
    return toy_p.bind(x, name="double")


def test_grad_names_the_fix():
    with pytest.raises(NotImplementedError, match=re.escape(jvp_message("toy kernel 'double'"))):
        jax.grad(lambda x: toy(x).sum())(jnp.ones(3))


def test_jvp_at_trace_level_names_the_fix():
    with pytest.raises(NotImplementedError, match=re.escape(jvp_message("toy kernel 'double'"))):
        jax.make_jaxpr(lambda x, t: jax.jvp(toy, (x,), (t,)))(jnp.ones(3), jnp.ones(3))


def test_vjp_names_the_fix():
    with pytest.raises(NotImplementedError, match=re.escape(jvp_message("toy kernel 'double'"))):
        jax.vjp(toy, jnp.ones(3))


def test_linear_transpose_names_the_fix():
    with pytest.raises(
        NotImplementedError, match=re.escape(transpose_message("toy kernel 'double'"))
    ):
        jax.linear_transpose(toy, jnp.ones(3))(jnp.ones(3))


def test_zero_tangent_is_not_differentiated():
    # grad with respect to another argument: the call runs as usual.
    assert jax.grad(lambda y, x: (y * toy(x)).sum())(1.0, jnp.ones(3)) == 6.0


# -- the fix the refusal names: ffi-core's (JAX's way), or the bridge's, per call

JAX_FIX = "define the derivative by wrapping the operation in `jax.custom_vjp`/`jax.custom_jvp`"


def test_the_default_fix_names_only_jax():
    assert derivative_fix() == JAX_FIX
    assert jvp_message("toy kernel 'double'") == (
        f"toy kernel 'double' has no JVP rule, so jax.grad, jax.jvp and jax.vjp cannot "
        f"differentiate it; {JAX_FIX}"
    )
    with raises_exactly(NotImplementedError, jvp_message("toy kernel 'double'")):
        jax.grad(lambda x: toy(x).sum())(jnp.ones(3))


def test_a_bridge_s_fix_names_its_route_then_jax():
    assert derivative_fix("`toy.def_jvp`") == (
        "define the derivative with `toy.def_jvp` or wrap the operation in "
        "`jax.custom_vjp`/`jax.custom_jvp`"
    )


@pytest.mark.parametrize("route", ["", 3])
def test_a_route_must_be_text(route):
    with raises_exactly(TypeError, f"`route` must be None or a non-empty str, got {route!r}"):
        derivative_fix(route)


# One primitive that two bridges share: each call's fix comes from its
# parameters (None: ffi-core's default).
shared_p = Primitive("ffi_core_test_shared")
shared_p.def_abstract_eval(lambda x, *, name, fix: x)
mlir.register_lowering(shared_p, mlir.lower_fun(lambda x, *, name, fix: x * 2, False))
raise_on_differentiation(
    shared_p, describe=lambda params: params["name"], fix=lambda params: params["fix"]
)


@pytest.mark.parametrize(
    ("fix", "said"),
    [
        (None, JAX_FIX),
        ("register it in the toy library", "register it in the toy library"),
        (derivative_fix("`toy.def_jvp`"), derivative_fix("`toy.def_jvp`")),
    ],
)
def test_each_call_names_its_bridge_s_fix(fix, said):
    def op(x):
        return shared_p.bind(x, name="kernel 'k'", fix=fix)

    with raises_exactly(
        NotImplementedError,
        f"kernel 'k' has no JVP rule, so jax.grad, jax.jvp and jax.vjp cannot differentiate "
        f"it; {said}",
    ):
        jax.jvp(op, (jnp.ones(3),), (jnp.ones(3),))
    with raises_exactly(
        NotImplementedError,
        f"kernel 'k' has no transpose rule, so jax.linear_transpose cannot transpose it; {said}",
    ):
        jax.linear_transpose(op, jnp.ones(3))(jnp.ones(3))


def test_kernel_info_carries_its_bridge_s_fix():
    from ffi_core.bridge import KernelInfo

    fields = {"name": "k", "label": "toy kernel 'k'", "qualname": "m.k", "digest": "ab"}
    assert KernelInfo(**fields).derivative_fix is None

    class ToyInfo(KernelInfo):
        derivative_fix = "define the derivative with `toy.def_jvp`"

    assert ToyInfo(**fields).derivative_fix == "define the derivative with `toy.def_jvp`"
    assert ToyInfo(**fields, derivative_fix="other").derivative_fix == "other"
    assert KernelInfo(**fields, derivative_fix="other").derivative_fix == "other"
