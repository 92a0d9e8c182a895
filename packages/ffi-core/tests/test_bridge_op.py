"""The bridge kit (``ffi_core.bridge``): the public-function skeleton, the one
``CallSig`` with extras, ``KernelInfo``, the catalog, and the rules that name
the kernel where a call goes through a primitive that is not the bridge's."""

from __future__ import annotations

import dataclasses
import re

import ffi_core
import ffi_core.bridge
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ffi_core import MissingKernelError, ShardingRule
from ffi_core.bridge import (
    ArraySig,
    BoundCall,
    BridgeCatalog,
    CallSig,
    KernelCall,
    KernelDTypes,
    KernelInfo,
    kernel_op,
    nondifferentiable_call,
    raise_on_differentiation,
)
from ffi_core.export import StepField, Unexportable
from ffi_core.testing import (
    BridgeUnderTest,
    check_differentiation_refused,
    conformance_tests,
    differentiation_refused_message,
    raises_exactly,
)
from jax.extend.core import Primitive
from jax.interpreters import mlir

# A toy bridge: its "kernel" is a Python function of jnp arrays, its primitive
# lowers it with mlir.lower_fun, and it has no derivative.
toy_p = Primitive("ffi_core_test_toy")
toy_p.multiple_results = True


def _toy_run(*args, info, out_avals, scale):
    return list(info.kernel(*args, out_avals, scale))


toy_p.def_abstract_eval(lambda *avals, info, out_avals, scale: list(out_avals))
toy_p.def_impl(_toy_run)
mlir.register_lowering(toy_p, mlir.lower_fun(_toy_run, multiple_results=True))
raise_on_differentiation(toy_p, describe=lambda params: params["info"].label)

DTYPES = KernelDTypes(("float32", "int32"), "toy kernels")


class ToyInfo(KernelInfo):
    def __init__(self, kernel):
        if not callable(kernel):
            raise TypeError(f"`kernel` must be a function, got {type(kernel)!r}")
        name = kernel.__name__
        super().__init__(
            name=name,
            label=f"toy kernel '{name}'",
            qualname=f"{kernel.__module__}.{kernel.__qualname__}",
            digest=ffi_core.bridge.kernel_digest(kernel),
            # kernel(inputs..., out_avals, scale): out_avals stands for the outputs
            n_params=ffi_core.bridge.positional_count(kernel) - 1,
            called=f"kernel '{name}'",
        )
        self.kernel = kernel


def _launch(call, out_avals, args, scalars):
    return toy_p.bind(*args, info=call.info, out_avals=out_avals, scale=scalars.get("scale", 1.0))


def toy_kernel(kernel, outs, *, scalar=False, **options):
    info = ToyInfo(kernel)
    seen = []

    def scalars(args, given):
        unknown = sorted(set(given) - {"scale"})
        if unknown:
            raise TypeError(f"toy kernel '{info.name}' has no scalar {unknown[0]!r}")
        return given

    def check_call(args, values):
        seen.append(values)

    op = kernel_op(
        info,
        outs,
        dtypes=DTYPES,
        launch=_launch,
        scalars=scalars if scalar else None,
        check_call=check_call,
        **options,
    )
    op.seen = seen
    return op


def add(x, y, out_avals, scale):
    return [scale * (x + y)]


def halves(x, out_avals, scale, spare=None):  # two outputs
    return [x[: x.shape[0] // 2], x[x.shape[0] // 2 :]]


F32 = jax.ShapeDtypeStruct((4,), jnp.float32)


def test_op_is_named_after_the_kernel():
    op = toy_kernel(add, F32)
    assert (op.__name__, op.__qualname__, op.__doc__) == (
        "add",
        "add",
        "toy kernel 'add' as a JAX operation.",
    )


def test_op_runs_and_rebuilds_the_structure_of_outs():
    x = jnp.arange(4.0, dtype=jnp.float32)
    np.testing.assert_array_equal(toy_kernel(add, F32)(x, x), 2 * np.arange(4.0))
    two = jax.ShapeDtypeStruct((2,), jnp.float32)
    out = jax.jit(toy_kernel(halves, {"lo": two, "hi": two}))(x)
    # A dict's outputs are the kernel's in sorted key order.
    np.testing.assert_array_equal(out["hi"], [0.0, 1.0])
    np.testing.assert_array_equal(out["lo"], [2.0, 3.0])


def test_scalars_reach_the_launch_and_the_checks_with_shapes():
    x = jnp.arange(4.0, dtype=jnp.float32)
    op = toy_kernel(add, F32, scalar=True)
    np.testing.assert_array_equal(op(x, x, scale=lambda shapes: shapes[0][0]), 8 * np.arange(4.0))
    assert op.seen == [{"scale": 4}]


def test_wrapping_checks_the_user_arguments():
    with raises_exactly(
        ValueError,
        "`vmap_method` must be one of None, 'sequential', 'sequential_unrolled', "
        "'expand_dims', 'broadcast_all', got 'fold'",
    ):
        toy_kernel(add, F32, vmap_method="fold")
    toy_kernel(add, F32, vmap_method="fold", vmap_methods=(None, "fold"))
    with raises_exactly(
        TypeError,
        "`outs` entry 0 (ShapeDtypeStruct(shape=(4,), dtype=float16)) has dtype float16, "
        "which toy kernels do not take; supported: float32, int32",
    ):
        toy_kernel(add, jax.ShapeDtypeStruct((4,), jnp.float16))
    with raises_exactly(
        ValueError,
        "`input_output_aliases` maps input 0 to output 1, but there are 1 outputs (valid: 0 to 0)",
    ):
        toy_kernel(add, F32, input_output_aliases={0: 1})


def test_check_outs_sees_the_avals():
    seen = []
    kernel_op(ToyInfo(add), F32, dtypes=DTYPES, launch=_launch, check_outs=seen.append)
    assert seen == [(jax.core.ShapedArray((4,), jnp.float32),)]


def test_call_checks_arity_keywords_and_inputs():
    x = jnp.zeros(4, jnp.float32)
    op = toy_kernel(add, F32)
    with raises_exactly(
        TypeError,
        "kernel 'add' takes 3 arguments but is called with 1 inputs and 1 outputs (2 arrays); "
        "the convention is kernel(in_1, ..., in_n, out_1, ..., out_m)",
    ):
        op(x)
    with raises_exactly(
        TypeError,
        "kernel 'add' takes arrays only (no scalar parameters), got the keyword(s) ['scale']",
    ):
        op(x, x, scale=2.0)
    with raises_exactly(
        TypeError,
        "input 1 of kernel 'add' has dtype float16, which toy kernels do not take; "
        "supported: float32, int32",
    ):
        op(x, x.astype(jnp.float16))
    with raises_exactly(TypeError, "toy kernel 'add' has no scalar 'n'"):
        toy_kernel(add, F32, scalar=True)(x, x, n=3)


def test_a_custom_arity_check_replaces_the_default():
    def arity(n_in, n_out):
        raise TypeError(f"{n_in} in, {n_out} out")

    op = kernel_op(ToyInfo(add), F32, dtypes=DTYPES, launch=_launch, arity=arity)
    with raises_exactly(TypeError, "2 in, 1 out"):
        op(jnp.zeros(4, jnp.float32), jnp.zeros(4, jnp.float32))


def test_a_derivative_gets_the_bound_call():
    calls = []

    def derivative(bound, *args):
        calls.append(bound)
        return bound(*args)

    x = jnp.ones(4, jnp.float32)
    op = kernel_op(ToyInfo(add), F32, dtypes=DTYPES, launch=_launch, derivative=derivative)
    np.testing.assert_array_equal(op(x, x), 2 * np.ones(4))
    (bound,) = calls
    assert isinstance(bound, BoundCall)
    assert bound.call == KernelCall(
        bound.call.info, (jax.core.ShapedArray((4,), jnp.float32),), (), None
    )
    assert hash(bound) == hash(dataclasses.replace(bound))
    assert bound.call.options == {"aliases": (), "vmap_method": None}


@pytest.mark.parametrize("transform", ffi_core.testing.DIFFERENTIATION_TRANSFORMS)
def test_differentiation_names_the_kernel(transform):
    op = toy_kernel(lambda x, out_avals, scale: [2 * x], F32)
    op_name = "toy kernel '<lambda>'"
    check_differentiation_refused(op, jnp.ones(4, jnp.float32), kernel=op_name, transform=transform)


def test_linear_transpose_of_a_sharded_call_names_the_kernel():
    # Under a sharding rule the call goes through partitioned_call_p, whose
    # transposition is the kernel's own rule: its message, not JAX's generic one.
    op = toy_kernel(lambda x, out_avals, scale: [2 * x], F32, sharding_rule="elementwise")
    x = jnp.ones(4, jnp.float32)
    assert "partitioned_call" in str(jax.make_jaxpr(op)(x))
    message = differentiation_refused_message("toy kernel '<lambda>'", "linear_transpose")
    with raises_exactly(NotImplementedError, message):
        jax.linear_transpose(op, x)(x)
    with raises_exactly(NotImplementedError, message):
        jax.linear_transpose(lambda x: op(x) + x, x)(x)


def _ffi_like(out_avals, x):
    # Stands for a call through a primitive the bridge does not own.
    return [jnp.sin(x)]


def _through_foreign_primitive(x):
    return nondifferentiable_call(
        _ffi_like, [x], [jax.core.ShapedArray(x.shape, x.dtype)], label="callable 'f'"
    )[0]


def test_nondifferentiable_call_runs_jits_and_vmaps():
    x = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3)
    np.testing.assert_allclose(_through_foreign_primitive(x), np.sin(x), rtol=1e-6)
    np.testing.assert_allclose(jax.jit(_through_foreign_primitive)(x), np.sin(x), rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(_through_foreign_primitive)(x), np.sin(x), rtol=1e-6)
    np.testing.assert_allclose(
        jax.vmap(_through_foreign_primitive, in_axes=1)(x), np.sin(x).T, rtol=1e-6
    )


@pytest.mark.parametrize("transform", ffi_core.testing.DIFFERENTIATION_TRANSFORMS)
def test_nondifferentiable_call_names_the_kernel(transform):
    check_differentiation_refused(
        _through_foreign_primitive,
        jnp.ones(3, jnp.float32),
        kernel="callable 'f'",
        transform=transform,
    )


def test_nondifferentiable_call_names_the_bridge_s_fix():
    def op(x):
        return nondifferentiable_call(
            _ffi_like,
            [x],
            [jax.core.ShapedArray(x.shape, x.dtype)],
            label="callable 'f'",
            fix="define the derivative with `toy.def_jvp`",
        )[0]

    for transform in ffi_core.testing.DIFFERENTIATION_TRANSFORMS:
        check_differentiation_refused(
            jax.vmap(op),
            jnp.ones((2, 3), jnp.float32),
            kernel="callable 'f'",
            transform=transform,
            fix="define the derivative with `toy.def_jvp`",
        )


def test_nondifferentiable_call_under_vmap_still_names_the_kernel():
    check_differentiation_refused(
        jax.vmap(_through_foreign_primitive),
        jnp.ones((2, 3), jnp.float32),
        kernel="callable 'f'",
        transform="grad",
    )


# -- CallSig ----------------------------------------------------------------------

F1 = ArraySig("float32", 1)


def test_call_sig_extras_are_fields():
    sig = CallSig((F1,), (F1,), extras={"context": "op", "hint": True})
    assert (sig.context, sig.hint, sig.extras) == ("op", True, (("context", "op"), ("hint", True)))
    assert repr(sig) == (
        "CallSig(inputs=(ArraySig(dtype='float32', rank=1),), "
        "outputs=(ArraySig(dtype='float32', rank=1),), batched=None, context='op', hint=True)"
    )
    assert sig == CallSig((F1,), (F1,), extras=(("context", "op"), ("hint", True)))
    assert hash(sig) == hash(CallSig((F1,), (F1,), extras={"context": "op", "hint": True}))
    assert sig != CallSig((F1,), (F1,), extras={"context": "other", "hint": True})
    with raises_exactly(AttributeError, "'CallSig' object has no attribute 'backward'"):
        sig.backward  # noqa: B018


def test_call_sig_without_extras_keeps_its_repr():
    # Target names are digests of it.
    assert repr(CallSig((F1,), (F1,), (True,))) == (
        "CallSig(inputs=(ArraySig(dtype='float32', rank=1),), "
        "outputs=(ArraySig(dtype='float32', rank=1),), batched=(True,))"
    )


def test_call_sig_steps_round_trip():
    sig = CallSig((F1, ArraySig("int32", 0)), (F1,), (True, False), extras={"backward": False})
    step = sig.to_step()
    assert step == {
        "inputs": [["float32", 1], ["int32", 0]],
        "outputs": [["float32", 1]],
        "batched": [True, False],
        "backward": False,
    }
    assert CallSig.from_step(step, ("backward",)) == sig


def test_kernel_arrays_drop_the_batch_axis():
    f2 = ArraySig("float32", 2)
    sig = CallSig((f2, ArraySig("int32", 0)), (f2,), (True, False))
    assert sig.kernel_arrays == (F1, ArraySig("int32", 0), F1)
    assert CallSig((f2,), (f2,)).kernel_arrays == (f2, f2)


# -- catalog ----------------------------------------------------------------------


def test_catalog_makes_each_info_once_and_finds_it_by_digest():
    made = []

    def make(kernel):
        made.append(kernel)
        return ToyInfo(kernel)

    catalog = BridgeCatalog(
        make,
        kernel_type=type(add),
        language="toy kernel",
        wrapper="toy_kernel",
        passed="the function",
    )
    info = catalog.info(add)
    assert catalog.info(add) is info and made == [add]
    assert catalog.find({"digest": info.digest, "kernel": info.qualname}) is info
    with raises_exactly(
        MissingKernelError,
        "toy kernel 'm.other' is not known here: import the module that wraps it with "
        "toy_kernel, or pass the function in `kernels`",
    ):
        catalog.find({"digest": "00", "kernel": "m.other"})
    with raises_exactly(
        MissingKernelError,
        f"toy kernel {info.qualname!r} is known here, but its code or the values it captures "
        "differ from the exported kernel's; import the version that was exported",
    ):
        catalog.find({"digest": "00", "kernel": info.qualname})
    assert catalog.accept(halves) and not catalog.accept(3)
    assert made == [add, halves]


def test_recipe_step_names_kernel_and_signature():
    info = ToyInfo(add)
    step = BridgeCatalog.recipe_step(
        "toy", info, CallSig((F1,), (F1,), extras={"hint": False}), code="ab"
    )
    assert step == {
        "kind": "toy",
        "kernel": info.qualname,
        "digest": info.digest,
        "inputs": [["float32", 1]],
        "outputs": [["float32", 1]],
        "batched": None,
        "hint": False,
        "code": "ab",
    }
    info.address_bound = ["global 'g' read by 'add' = <object at 0x...>"]
    unexportable = BridgeCatalog.recipe_step("toy", info, CallSig((F1,), (F1,)))
    assert isinstance(unexportable, Unexportable)


def test_a_step_without_an_added_extra_rebuilds():
    # A step written before an extra existed (StepField.added) lacks it: the
    # signature given to the rebuilder holds the extras the step has.
    from ffi_core.export._rebuilders import rebuilder
    from ffi_core.export._recipe import check_step

    catalog = BridgeCatalog(
        ToyInfo, kernel_type=type(add), language="toy kernel", wrapper="toy_kernel", passed="f"
    )
    info = catalog.info(add)
    seen = []
    catalog.register(
        "ffi_core_tests.added_extra",
        lambda info, sig, step: seen.append((info, sig)),
        extras={
            "hint": StepField.flag(),
            "late": StepField.added(StepField.flag()),
        },
    )
    registered = rebuilder("ffi_core_tests.added_extra")
    for extras in ({"hint": True}, {"hint": True, "late": True}):
        sig = CallSig((F1,), (F1,), extras=extras)
        step = BridgeCatalog.recipe_step("ffi_core_tests.added_extra", info, sig)
        check_step(step, registered.fields, "step")
        registered.rebuild(step)
        assert seen.pop() == (info, sig)


def test_kernel_compile_error_shows_its_public_name():
    assert ffi_core.KernelCompileError.__module__ == "ffi_core"
    assert ffi_core.bridge.KernelCompileError is ffi_core.KernelCompileError


def test_sharding_rule_still_runs_on_one_device():
    x = jnp.arange(4.0, dtype=jnp.float32)
    op = toy_kernel(add, F32, sharding_rule=ShardingRule("i, i -> i"))
    np.testing.assert_array_equal(jax.jit(op)(x, x), 2 * np.arange(4.0))
    assert re.search("partitioned_call", str(jax.make_jaxpr(op)(x, x)))


# -- bridge_primitive -------------------------------------------------------------


def _double(*args, out_avals, aliases, vmap_method, batched, name):
    return [2 * args[0]]


double_p = ffi_core.bridge.bridge_primitive(
    "ffi_core_test_double", describe=lambda params: f"toy kernel {params['name']!r}"
)
mlir.register_lowering(double_p, mlir.lower_fun(_double, multiple_results=True))


def _double_op(x):
    (out,) = double_p.bind(
        x,
        out_avals=(jax.core.ShapedArray(x.shape, x.dtype),),
        aliases=(),
        vmap_method=None,
        batched=None,
        name="double",
    )
    return out


def test_bridge_primitive_has_the_shared_rules():
    x = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3)
    assert double_p.multiple_results
    np.testing.assert_array_equal(_double_op(x), 2 * x)
    np.testing.assert_array_equal(jax.vmap(_double_op)(x), 2 * x)
    np.testing.assert_array_equal(jax.vmap(_double_op, in_axes=1, out_axes=1)(x), 2 * x)
    check_differentiation_refused(_double_op, x, kernel="toy kernel 'double'", transform="grad")


def scale(x, out_avals, scale):
    return [2 * x]


# The conformance suite every bridge's tests run, over the toy bridge.
TestToyConformance = conformance_tests(
    BridgeUnderTest(
        kernel="toy kernel 'scale'",
        make=lambda outs, **options: toy_kernel(scale, outs, **options),
        compile_error=ffi_core.bridge.KernelCompileError,
        dtypes_kernels="toy kernels",
        supported_dtypes=DTYPES.names,
        inputs_kernel="kernel 'scale'",
        batching=False,
    )
)
