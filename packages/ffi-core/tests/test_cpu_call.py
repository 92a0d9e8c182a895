"""ffi_core.bridge.cpu: the one CPU handler template and cpu_call_p, with a planner
of a negation written in the body's few lines."""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip(
    "numba", reason="ffi_core.bridge.cpu builds handlers with numba (ffi-core[native])"
)

import ffi_core
import ffi_core.bridge
from ffi_core.bridge import ArraySig
from ffi_core.bridge.cpu import (
    AttrSig,
    CpuPlan,
    HandlerBody,
    HandlerSpec,
    build_cpu_handler,
    cpu_call,
    cpu_handler_source,
    cpu_threaded_loop_source,
)
from ffi_core.testing import differentiation_refused_message, raises_exactly

F32 = ArraySig("float32", 1)
NEG = HandlerBody(
    call=("for i in range(v_0.size):", "    v_1[i] = -v_0[i]", "return 0"),
    row=("for i in range(v_0.shape[1]):", "    v_1[b, i] = -v_0[b, i]", "error = 0"),
    views=True,
)
BUILDS: list[HandlerSpec] = []


@dataclasses.dataclass(frozen=True)
class NegPlanner:
    label: str = "test kernel 'neg'"

    def plan(self, inputs, outputs, batched, hint) -> CpuPlan:
        spec = HandlerSpec(self.label, inputs, outputs, batched, int(hint))

        def build():
            BUILDS.append(spec)
            return build_cpu_handler(spec, NEG)

        return CpuPlan("test_cpu.neg", (repr(spec),), repr(spec), build)


def neg(x):
    return cpu_call(NegPlanner(), [x], (jax.core.ShapedArray(x.shape, x.dtype),))[0]


def test_cpu_call_runs_eager_jit_and_vmap() -> None:
    x = jnp.arange(4, dtype=jnp.float32)
    np.testing.assert_array_equal(neg(x), -x)
    np.testing.assert_array_equal(jax.jit(neg)(x + 1), -(x + 1))
    xs = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    np.testing.assert_array_equal(jax.jit(jax.vmap(neg))(xs), -xs)


def test_a_handler_is_built_once_per_signature() -> None:
    x = jnp.arange(3, dtype=jnp.int32)
    before = len(BUILDS)
    jax.jit(neg)(x)
    jax.jit(lambda x: neg(x) + 1)(x)
    assert len(BUILDS) == before + 1


# A body whose batch_call serves a batch of more than 4 rows in one go (its
# result, -x - 100, tells it from the rows'), and a planner whose prepare
# records what each lowering asks for.
WHOLE = dataclasses.replace(
    NEG,
    batch_call=(
        "if buffer_dim(b_1, 0) > 4:",
        "    v_1[...] = -v_0 - 100",
        "    return 0",
    ),
)
PREPARED: list[tuple[int | None, int | None]] = []


@dataclasses.dataclass(frozen=True)
class WholeBatchPlanner:
    label: str = "test kernel 'whole'"

    def plan(self, inputs, outputs, batched, hint) -> CpuPlan:
        spec = HandlerSpec(self.label, inputs, outputs, batched, int(hint))
        return CpuPlan(
            "test_cpu.whole",
            (repr(spec),),
            repr(spec),
            lambda: build_cpu_handler(spec, WHOLE),
            prepare=lambda handler, work, rows: PREPARED.append((work, rows)),
        )


def whole(x):
    out = (jax.core.ShapedArray(x.shape, x.dtype),)
    return cpu_call(WholeBatchPlanner(), [x], out)[0]


def test_a_batch_call_serves_the_whole_batch_and_prepare_sees_its_rows() -> None:
    few = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    many = jnp.arange(28, dtype=jnp.float32).reshape(7, 4)
    del PREPARED[:]
    np.testing.assert_array_equal(jax.jit(jax.vmap(whole))(few), -few)
    np.testing.assert_array_equal(jax.jit(jax.vmap(whole))(many), -many - 100)
    np.testing.assert_array_equal(jax.jit(whole)(many[0]), -many[0])
    assert PREPARED == [(12, 3), (28, 7), (4, None)]


@pytest.mark.parametrize("transform", ["grad", "jvp"])
def test_differentiation_names_the_kernel(transform: str) -> None:
    x = jnp.arange(3, dtype=jnp.float32)
    with raises_exactly(
        NotImplementedError, differentiation_refused_message("test kernel 'neg'", transform)
    ):
        if transform == "grad":
            jax.grad(lambda x: neg(x).sum())(x)
        else:
            jax.jvp(neg, (x,), (x,))


@dataclasses.dataclass(frozen=True)
class FixedNegPlanner(NegPlanner):
    # A bridge's planner that names its own way to a derivative.
    label: str = "fixed kernel 'neg'"
    derivative_fix: str = "define the derivative with `fixed.def_jvp`"


@pytest.mark.parametrize("transform", ["grad", "linear_transpose"])
def test_differentiation_names_the_planner_s_fix(transform: str) -> None:
    def fixed_neg(x):
        return cpu_call(FixedNegPlanner(), [x], (jax.core.ShapedArray(x.shape, x.dtype),))[0]

    x = jnp.arange(3, dtype=jnp.float32)
    message = differentiation_refused_message(
        "fixed kernel 'neg'", transform, "define the derivative with `fixed.def_jvp`"
    )
    with raises_exactly(NotImplementedError, message):
        if transform == "grad":
            jax.grad(lambda x: fixed_neg(x).sum())(x)
        else:
            jax.linear_transpose(fixed_neg, x)(x)


def test_a_wrong_buffer_is_an_ffi_error_naming_the_kernel() -> None:
    # The handler of float32 vectors, called by hand with an int32 vector.
    spec = HandlerSpec("test kernel 'neg'", (F32,), (F32,))
    name = "test_cpu.neg_by_hand"
    ffi_core.bridge.register_target(
        name, build_cpu_handler(spec, NEG), content=repr(spec), platform="cpu"
    )
    call = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((3,), jnp.int32))
    message = "test kernel 'neg': buffer 0 is not float32 of rank 1"
    with pytest.raises(Exception, match=re.escape(message)):
        jax.block_until_ready(call(jnp.arange(3, dtype=jnp.int32)))


def test_the_template_names_the_c_api_constants() -> None:
    spec = HandlerSpec(
        "test kernel 'k'",
        (F32,),
        (F32,),
        attrs=(AttrSig("alpha", "float32"), AttrSig("dims", "int64", 3)),
    )
    source = cpu_handler_source(spec, NEG)
    assert "ErrorCode.INVALID_ARGUMENT" in source
    assert "AttrType.SCALAR" in source and "AttrType.ARRAY" in source
    assert "DataType.F32" in source and "DataType.S64" in source
    assert not re.search(r"error_create\([^\n]*, \d+\)", source)
    assert not re.search(r"(attr_type|attr_scalar_dtype|buffer_dtype)\([^)]*\) != \d", source)
    assert (
        "return error_create(api, cstring(\"test kernel 'k': attribute dims is not 3 int64\"), "
        "ErrorCode.INVALID_ARGUMENT)" in source
    )


def test_a_threaded_loop_runs_the_rows_in_a_prange_and_keeps_the_first_error() -> None:
    rows = (True,)
    spec = HandlerSpec("test kernel 'k'", (F32,), (F32,), rows, record_words=4)
    body = HandlerBody(
        call=(),
        row=("error = row_call(v_0[b], v_1[b])",),
        row_args=("word_0", "v_0", "v_1"),
        threads=1000,
        threaded_loop="word_3",
        views=True,
    )
    loop = cpu_threaded_loop_source(spec, body)
    assert "def threaded_loop(api, name, work, n, first, word_0, v_0, v_1):" in loop
    assert "    for b in prange(n):\n        error = row_call(v_0[b], v_1[b])\n" in loop
    assert "    store(first, first_error(api, errors), types.uintp)" in loop
    # The handler holds no loop of threads: it calls the one at word_3.
    handler = cpu_handler_source(spec, body)
    assert "prange" not in handler.split("def handler", 1)[1]
    assert "if work >= 1000 and n > 1 and word_3 != 0:" in handler
    unbatched = dataclasses.replace(spec, batched=None)
    with raises_exactly(
        ValueError,
        "a threaded loop is for a batched call with threads and threaded_loop",
    ):
        cpu_threaded_loop_source(unbatched, body)
