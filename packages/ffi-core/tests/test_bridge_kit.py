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
    output_avals,
    raise_on_differentiation,
)
from ffi_core.testing import differentiation_refused_message
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
