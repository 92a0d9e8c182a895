"""Call signatures and the checks of a kernel call's arguments, shared by the bridges."""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from ffi_core.bridge import (
    ArraySig,
    CallSig,
    array_sig,
    check_aliases,
    check_arity,
    check_dtype,
    check_inputs,
    is_output_spec,
    normalize_outs,
    output_avals,
    positional_count,
    scalar_value,
)
from ffi_core.testing import whole_message
from jax import core as jax_core

S = jax.ShapeDtypeStruct
F3 = S((3,), jnp.float32)
ACCEPTED = ("bool", "int32", "float32", "float64")
KIND = "test"
SUPPORTED = ", ".join(ACCEPTED)
# What one output of `outs` may be, as the messages say it.
OUTPUT_SPEC = (
    "an object with `shape` and `dtype` (a jax.ShapeDtypeStruct, a jax.core.ShapedArray, an array)"
)


def _dtype_message(what: str, dtype: str) -> str:
    return f"{what} has dtype {dtype}, which test kernels do not take; supported: {SUPPORTED}"


# --- signatures ------------------------------------------------------------


def test_array_sig() -> None:
    assert array_sig(jax_core.ShapedArray((2, 3), jnp.float32)) == ArraySig("float32", 2)
    assert array_sig(np.float64(1.0)) == ArraySig("float64", 0)
    assert array_sig(jnp.ones((), jnp.bfloat16)) == ArraySig("bfloat16", 0)
    assert str(ArraySig("int8", 3)) == "int8[3d]"


def test_call_sig_describe() -> None:
    f32 = ArraySig("float32", 1)
    assert CallSig((f32, ArraySig("bool", 0)), (f32,)).describe() == (
        "inputs (float32[1d], bool[0d]) and outputs (float32[1d])"
    )
    assert (
        CallSig((), (f32, f32)).describe() == "inputs (none) and outputs (float32[1d], float32[1d])"
    )


@dataclasses.dataclass(frozen=True)
class CallSigWithContext(CallSig):
    context: str = ""


# Target names and on-disk handlers are digests of these reprs: a change here
# renames every FFI target (breaking jax.export artifacts and caches).
KNOWN_REPR = (
    "CallSig(inputs=(ArraySig(dtype='float32', rank=2), ArraySig(dtype='int32', rank=0)), "
    "outputs=(ArraySig(dtype='float32', rank=2),), batched=(True, False))"
)


def test_call_sig_repr_is_its_fields() -> None:
    sig = CallSig((ArraySig("float32", 2), ArraySig("int32", 0)), (ArraySig("float32", 2),))
    assert repr(dataclasses.replace(sig, batched=(True, False))) == KNOWN_REPR
    assert repr(sig).endswith("batched=None)")


def test_call_sig_subclass_adds_fields_to_the_repr() -> None:
    f32 = ArraySig("float32", 1)
    sig = CallSigWithContext((f32,), (f32,), None, "ctx")
    assert repr(sig) == (
        "CallSigWithContext(inputs=(ArraySig(dtype='float32', rank=1),), "
        "outputs=(ArraySig(dtype='float32', rank=1),), batched=None, context='ctx')"
    )
    assert sig.describe() == "inputs (float32[1d]) and outputs (float32[1d])"


def test_call_sig_is_a_value() -> None:
    f32 = ArraySig("float32", 1)
    a, b = CallSig((f32,), (f32,), (True,)), CallSig((ArraySig("float32", 1),), (f32,), (True,))
    assert a == b and hash(a) == hash(b)
    assert a != CallSig((f32,), (f32,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.batched = None  # type: ignore[misc]


# --- dtypes ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", np.float64, np.dtype(bool), jnp.int32])
def test_check_dtype_accepts(dtype: object) -> None:
    resolved = check_dtype(dtype, "`x`", accepted=ACCEPTED, kind=KIND)
    assert resolved == np.dtype(dtype)


@pytest.mark.parametrize(
    ("dtype", "shown"),
    [
        (np.dtype(np.float16), "float16"),
        (np.dtype(ml_dtypes.bfloat16), "bfloat16"),
        (np.dtype(object), "object"),
        ("not a dtype", "not a dtype"),
        (3.5, "3.5"),
    ],
    ids=["float16", "bfloat16", "object", "str", "float"],
)
def test_check_dtype_refuses(dtype: object, shown: str) -> None:
    with pytest.raises(TypeError, match=whole_message(_dtype_message("`x`", shown))):
        check_dtype(dtype, "`x`", accepted=ACCEPTED, kind=KIND)


def test_check_dtype_names_the_kind() -> None:
    message = "input 0 has dtype int8, which numba CPU kernels do not take; supported: float32"
    with pytest.raises(TypeError, match=whole_message(message)):
        check_dtype(np.dtype(np.int8), "input 0", accepted=("float32",), kind="numba CPU")


# --- outs ------------------------------------------------------------------


@dataclasses.dataclass
class Pair:
    a: object
    b: object


jax.tree_util.register_dataclass(Pair, data_fields=["a", "b"], meta_fields=[])


def test_normalize_outs() -> None:
    structs, rebuild = normalize_outs(F3)
    assert structs == (F3,) and rebuild((1,)) == 1
    structs, rebuild = normalize_outs([F3, F3])
    assert structs == (F3, F3) and rebuild([1, 2]) == (1, 2)
    structs, rebuild = normalize_outs((F3,))
    assert structs == (F3,) and rebuild([1]) == (1,)
    structs, rebuild = normalize_outs({"b": F3, "a": S((2,), jnp.int32)})
    assert structs == (S((2,), jnp.int32), F3) and rebuild((1, 2)) == {"a": 1, "b": 2}
    structs, rebuild = normalize_outs(Pair(F3, {"c": F3}))
    assert structs == (F3, F3) and rebuild((1, 2)) == Pair(1, {"c": 2})


@pytest.mark.parametrize(
    ("outs", "where", "shape"),
    [
        (S((2, -1), jnp.float32), "`outs`", "(2, -1)"),
        ([F3, S((-3,), jnp.float32)], "`outs[1]`", "(-3,)"),
    ],
)
def test_normalize_outs_refuses_a_negative_size(outs, where: str, shape: str) -> None:
    with pytest.raises(
        ValueError,
        match=whole_message(f"{where} has the shape {shape}; an array's sizes are 0 or more"),
    ):
        normalize_outs(outs)


class _Spec:
    """Not JAX's: any object with `shape` and `dtype` describes an output."""

    shape = (3,)
    dtype = np.dtype(np.float32)


# Every kind the seed's `ShapeDtype` covers describes the same output as F3.
SPEC_KINDS = {
    "ShapeDtypeStruct": F3,
    "ShapedArray": jax_core.ShapedArray((3,), jnp.float32),
    "numpy-array": np.zeros(3, np.float32),
    "jax-array": jnp.zeros(3, jnp.float32),
    "shape-and-dtype": _Spec(),
}


@pytest.mark.parametrize("kind", list(SPEC_KINDS))
def test_normalize_outs_accepts_every_output_spec(kind: str) -> None:
    spec = SPEC_KINDS[kind]
    assert is_output_spec(spec)
    structs, rebuild = normalize_outs(spec)
    assert structs == (F3,) and all(type(s) is S for s in structs) and rebuild((1,)) == 1
    structs, rebuild = normalize_outs([spec, F3])
    assert structs == (F3, F3) and rebuild((1, 2)) == (1, 2)
    structs, rebuild = normalize_outs({"a": spec, "b": (spec,)})
    assert structs == (F3, F3) and rebuild((1, 2)) == {"a": 1, "b": (2,)}
    avals, _ = output_avals(spec, accepted=ACCEPTED, kind=KIND)
    assert avals == (jax_core.ShapedArray((3,), np.dtype(np.float32)),)


def test_normalize_outs_refuses_a_spec_that_is_no_array() -> None:
    class Odd:
        shape = (3,)
        dtype = "not a dtype"

    message = (
        f"`outs` must be {OUTPUT_SPEC}, got {Odd!r} whose shape (3,) and dtype 'not a dtype' "
        "do not describe an array: "
    )
    with pytest.raises(TypeError, match="(?s)^" + re.escape(message)):
        normalize_outs(Odd())


@pytest.mark.parametrize(
    ("outs", "message"),
    [
        (
            3,
            f"`outs` must be {OUTPUT_SPEC} or a sequence or pytree of them, got <class 'int'>",
        ),
        (
            "f",
            f"`outs` must be {OUTPUT_SPEC} or a sequence or pytree of them, got <class 'str'>",
        ),
        ([F3, 3], f"`outs[1]` must be {OUTPUT_SPEC}, got <class 'int'>"),
        (
            {"a": F3, "b": "f"},
            f"`outs` must be {OUTPUT_SPEC} or a sequence or pytree of them, got "
            "a leaf of <class 'str'>",
        ),
    ],
    ids=["int", "str", "list-with-int", "dict-with-str"],
)
def test_normalize_outs_refuses(outs: object, message: str) -> None:
    with pytest.raises(TypeError, match=whole_message(message)):
        normalize_outs(outs)
    with pytest.raises(TypeError, match=whole_message(message)):
        output_avals(outs, accepted=ACCEPTED, kind=KIND)


def test_output_avals() -> None:
    avals, rebuild = output_avals(
        {"x": F3, "y": S((2, 0), jnp.bool_)}, accepted=ACCEPTED, kind=KIND
    )
    assert avals == (
        jax_core.ShapedArray((3,), np.dtype(np.float32)),
        jax_core.ShapedArray((2, 0), np.dtype(np.bool_)),
    )
    assert rebuild((1, 2)) == {"x": 1, "y": 2}


@pytest.mark.parametrize("outs", [[], (), {}], ids=["list", "tuple", "dict"])
def test_output_avals_refuses_none(outs: object) -> None:
    message = "`outs` must hold at least one jax.ShapeDtypeStruct, got none"
    with pytest.raises(ValueError, match=whole_message(message)):
        output_avals(outs, accepted=ACCEPTED, kind=KIND)


def test_output_avals_checks_dtypes() -> None:
    out = S((3,), jnp.float16)
    message = _dtype_message(f"`outs` entry 1 ({out})", "float16")
    with pytest.raises(TypeError, match=whole_message(message)):
        output_avals([F3, out], accepted=ACCEPTED, kind=KIND)


# --- aliases ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("aliases", "n_outs", "pairs"),
    [
        (None, 1, ()),
        ({}, 1, ()),
        ({0: 0}, 1, ((0, 0),)),
        ({3: 1, 1: 0}, 2, ((1, 0), (3, 1))),
        ({np.int64(2): np.int32(0)}, 1, ((2, 0),)),
    ],
    ids=["none", "empty", "one", "sorted", "numpy-ints"],
)
def test_check_aliases(aliases: object, n_outs: int, pairs: tuple[tuple[int, int], ...]) -> None:
    result = check_aliases(aliases, n_outs)
    assert result == pairs
    assert all(type(k) is int for pair in result for k in pair)


@pytest.mark.parametrize(
    ("aliases", "error", "message"),
    [
        (
            [(0, 0)],
            TypeError,
            "`input_output_aliases` must be a dict {input index: output index}, got <class 'list'>",
        ),
        ({"x": 0}, TypeError, "`input_output_aliases` input indices must be ints, got 'x'"),
        ({0: 0.5}, TypeError, "`input_output_aliases` output indices must be ints, got 0.5"),
        ({True: 0}, TypeError, "`input_output_aliases` input indices must be ints, got True"),
        ({0: False}, TypeError, "`input_output_aliases` output indices must be ints, got False"),
        ({-1: 0}, ValueError, "`input_output_aliases` input indices must be >= 0, got -1"),
        (
            {0: 1},
            ValueError,
            "`input_output_aliases` maps input 0 to output 1, but there are 1 outputs "
            "(valid: 0 to 0)",
        ),
        (
            {0: -1},
            ValueError,
            "`input_output_aliases` maps input 0 to output -1, but there are 1 outputs "
            "(valid: 0 to 0)",
        ),
        (
            {0: 0, 2: 0},
            ValueError,
            "`input_output_aliases` maps several inputs to one output: {0: 0, 2: 0}",
        ),
    ],
    ids=[
        "list",
        "input-str",
        "output-float",
        "input-bool",
        "output-bool",
        "input-negative",
        "output-too-large",
        "output-negative",
        "one-output-twice",
    ],
)
def test_check_aliases_refuses(aliases: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=whole_message(message)):
        check_aliases(aliases, 1)


# --- inputs ----------------------------------------------------------------


def _check(args: list[object], aliases: tuple[tuple[int, int], ...] = ()) -> None:
    avals = (jax_core.ShapedArray((3,), np.dtype(np.float32)),)
    check_inputs(args, avals, aliases, name="kernel 'k'", accepted=ACCEPTED, kind=KIND)


@pytest.mark.parametrize(
    "args",
    [
        [],
        [jnp.ones(3, jnp.float32)],
        [np.ones(5, np.int32), np.float64(1.0), np.bool_(True)],
    ],
    ids=["none", "jax", "numpy"],
)
def test_check_inputs_accepts(args: list[object]) -> None:
    _check(args)


def test_check_inputs_accepts_aliases() -> None:
    _check([np.ones(2, np.int32), jnp.ones(3, jnp.float32)], ((1, 0),))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            [[1.0, 2.0]],
            "input 0 of kernel 'k' must be an array (jax.Array or numpy.ndarray), "
            "got <class 'list'>",
        ),
        (
            [np.ones(3, np.float32), 1.0],
            "input 1 of kernel 'k' must be an array (jax.Array or numpy.ndarray), "
            "got <class 'float'>",
        ),
        ([jnp.ones(3, jnp.bfloat16)], _dtype_message("input 0 of kernel 'k'", "bfloat16")),
        ([np.ones(3, np.float16)], _dtype_message("input 0 of kernel 'k'", "float16")),
    ],
    ids=["list", "float", "bfloat16", "float16"],
)
def test_check_inputs_refuses(args: list[object], message: str) -> None:
    with pytest.raises(TypeError, match=whole_message(message)):
        _check(args)


@pytest.mark.parametrize(
    ("args", "aliases", "message"),
    [
        (
            [jnp.ones(3, jnp.float32)],
            ((1, 0),),
            "`input_output_aliases` maps input 1 to output 0, but kernel 'k' is called "
            "with 1 inputs (valid: 0 to 0)",
        ),
        (
            [],
            ((0, 0),),
            "`input_output_aliases` maps input 0 to output 0, but kernel 'k' is called "
            "with 0 inputs (valid: none)",
        ),
        (
            [jnp.ones(4, jnp.float32)],
            ((0, 0),),
            "`input_output_aliases` maps input 0 (float32[4]) to output 0 (float32[3]); "
            "aliased buffers must have the same shape and dtype",
        ),
        (
            [np.ones(3, np.int32)],
            ((0, 0),),
            "`input_output_aliases` maps input 0 (int32[3]) to output 0 (float32[3]); "
            "aliased buffers must have the same shape and dtype",
        ),
    ],
    ids=["input-too-large", "no-inputs", "shape", "dtype"],
)
def test_check_inputs_refuses_aliases(
    args: list[object], aliases: tuple[tuple[int, int], ...], message: str
) -> None:
    with pytest.raises(ValueError, match=whole_message(message)):
        _check(args, aliases)


# --- arity -----------------------------------------------------------------


def _two(x, out):
    pass


def _keyword_only(x, y, out, *, scale=1.0):
    pass


def _positional_only(x, /, out):
    pass


def _var(x, *rest):
    pass


@pytest.mark.parametrize(
    ("fn", "count"),
    [
        (_two, 2),
        (_keyword_only, 3),
        (_positional_only, 2),
        (_var, None),
        (lambda: None, 0),
        (print, None),  # a builtin: Python reads no signature
    ],
    ids=["two", "keyword-only", "positional-only", "var", "none", "builtin"],
)
def test_positional_count(fn: object, count: int | None) -> None:
    assert positional_count(fn) == count


@pytest.mark.parametrize(("n_params", "n_in", "n_out"), [(2, 1, 1), (3, 0, 3), (None, 5, 1)])
def test_check_arity_accepts(n_params: int | None, n_in: int, n_out: int) -> None:
    check_arity(n_params, n_in, n_out, name="kernel 'k'")


@pytest.mark.parametrize(("n_in", "n_out"), [(0, 1), (2, 1), (1, 2)])
def test_check_arity_refuses(n_in: int, n_out: int) -> None:
    message = (
        f"kernel 'k' takes 2 arguments but is called with {n_in} inputs and {n_out} outputs "
        f"({n_in + n_out} arrays); the convention is kernel(in_1, ..., in_n, out_1, ..., out_m)"
    )
    with pytest.raises(TypeError, match=whole_message(message)):
        check_arity(2, n_in, n_out, name="kernel 'k'")


@pytest.mark.parametrize(
    ("value", "dtype", "expected"),
    [
        (3, "int32", np.int32(3)),
        (np.uint64(2**64 - 1), "uint64", np.uint64(2**64 - 1)),
        (2, "float16", np.float16(2.0)),
        (np.float64(2.5), "float32", np.float32(2.5)),
        (True, "bool", np.bool_(True)),
        (float("inf"), "float32", np.float32("inf")),
    ],
)
def test_scalar_value(value, dtype: str, expected) -> None:
    got = scalar_value(value, dtype, "scalar 'x'")
    assert got == expected and got.dtype == np.dtype(dtype)


@pytest.mark.parametrize(
    ("value", "dtype", "error", "message"),
    [
        (1, "bool", TypeError, "scalar 'x' (bool) must be a bool (True or False), got 1"),
        (
            True,
            "int8",
            TypeError,
            "scalar 'x' (int8) must be a number, got the bool True (bools are not taken for numbers)",
        ),
        (
            1.5,
            "int32",
            TypeError,
            "scalar 'x' (int32) must be an int, got 1.5 (a float is not truncated)",
        ),
        ("1", "float32", TypeError, "scalar 'x' (float32) must be a number, got '1'"),
        (300, "uint8", OverflowError, "scalar 'x' (uint8) is 300, outside its range [0, 255]"),
        (
            1e6,
            "float16",
            OverflowError,
            "scalar 'x' (float16) is 1000000.0, beyond its largest value 65504",
        ),
        (
            jnp.float32(1),
            "float32",
            TypeError,
            "scalar 'x' (float32) is static: it takes a Python or NumPy number, got a traced or "
            "device array; pass arrays as inputs",
        ),
    ],
)
def test_scalar_value_refuses(value, dtype: str, error, message: str) -> None:
    with pytest.raises(error, match=whole_message(message)):
        scalar_value(value, dtype, "scalar 'x'")
