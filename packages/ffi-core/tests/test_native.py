"""ffi_core.abi.native: raw memory intrinsics, and native handlers end to end through JAX."""

from __future__ import annotations

import ctypes
import inspect
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

numba = pytest.importorskip("numba", reason='ffi_core.abi.native needs the "native" extra (numba)')

import ffi_core  # noqa: E402
from ffi_core.abi import ErrorCode  # noqa: E402
from ffi_core.abi import native as N  # noqa: E402
from numba import types  # noqa: E402

# A failing handler surfaces as JaxRuntimeError; jaxlib's C++ fast path for an
# already-compiled jit function raises the same message as a ValueError.
RUNTIME_ERRORS = (jax.errors.JaxRuntimeError, ValueError)


# --- intrinsics ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("numba_type", "value"),
    [
        (types.int8, -7),
        (types.uint8, 250),
        (types.int32, -123456),
        (types.uint32, 4_000_000_000),
        (types.int64, -(2**40)),
        (types.uint64, 2**63 + 5),
        (types.float32, 1.5),
        (types.float64, -2.25),
    ],
    ids=str,
)
def test_load_store_round_trip(numba_type: types.Number, value: float) -> None:
    @numba.njit
    def round_trip(address, value):
        before = N.load(address, numba_type)
        N.store(address, value, numba_type)
        return before, N.load(address, numba_type)

    dtype = np.dtype(str(numba_type))
    buffer = np.zeros(2, dtype)
    before, after = round_trip(buffer.ctypes.data + dtype.itemsize, value)
    assert before == 0
    assert after == value
    np.testing.assert_array_equal(buffer, np.array([0, value], dtype))


def test_store_into_numpy_buffer_is_visible() -> None:
    @numba.njit
    def fill(address, n):
        for i in range(n):
            N.store(address + 8 * i, i * 1.5, types.float64)

    buffer = np.zeros(4)
    fill(buffer.ctypes.data, buffer.size)
    np.testing.assert_array_equal(buffer, [0.0, 1.5, 3.0, 4.5])


def test_load_at_and_store_at_add_a_literal_offset() -> None:
    @numba.njit
    def swap_halves(address):
        low = N.load_at(address, 0, types.int32)
        high = N.load_at(address, 4, types.int32)
        N.store_at(address, 0, high, types.int32)
        N.store_at(address, 4, low, types.int32)
        N.store_at(address, 8, 2.5, types.float64)  # the value converted to the type
        return N.load_at(address, 8, types.float64)

    buffer = np.zeros(2, np.int64)
    buffer.view(np.int32)[:2] = [7, -9]
    assert swap_halves(buffer.ctypes.data) == 2.5
    assert list(buffer.view(np.int32)[:2]) == [-9, 7]
    assert buffer.view(np.float64)[1] == 2.5


@numba.njit
def _misuse_load_at(offset):
    return N.load_at(8, offset, types.int32)


@numba.njit
def _misuse_store_at(offset):
    N.store_at(8, offset, 0, types.int32)


def test_voidptr_makes_a_carray() -> None:
    @numba.njit
    def total(address, n):
        return numba.carray(N.voidptr(address), (n,), np.float32).sum()

    data = np.arange(10, dtype=np.float32)
    assert total(data.ctypes.data, data.size) == data.sum()


def test_cstring() -> None:
    @numba.njit
    def greeting():
        return N.cstring("hello ffi")

    @numba.njit
    def empty():
        return N.cstring("")

    assert ctypes.string_at(greeting()) == b"hello ffi"
    assert ctypes.string_at(empty()) == b""


@numba.njit
def _store_one(a):
    a[0] = 1


@numba.njit
def _misuse_load(x):
    return N.load(x, types.int32)


@numba.njit
def _misuse_load_type(x):
    return N.load(x, 3)


@numba.njit
def _misuse_store(x):
    N.store(x, 1, types.int32)


@numba.njit
def _misuse_voidptr(x):
    return N.voidptr(x)


@numba.njit
def _misuse_cstring(x):
    return N.cstring(x)


@numba.njit
def _misuse_call_api_fn(x):
    return N.call_api_fn(x, 1)


@numba.njit
def _misuse_stack_buffer(x):
    return N.stack_buffer(x)


@numba.njit
def _misuse_guarded_fn(x):
    return N.call_guarded(3, x, N.cstring("k"), (1,))


@numba.njit
def _misuse_guarded_name(x):
    return N.call_guarded(_store_one, 0, x, (1,))


@numba.njit
def _misuse_guarded_args(x):
    return N.call_guarded(_store_one, x, N.cstring("k"), 1)


_ARRAY_VIEW_USAGE = "array_view(address: int, shape: tuple of int, dtype: a NumPy scalar type)"


@numba.njit
def _misuse_array_view(x):
    return N.array_view(x, (4,), np.float32)


@numba.njit
def _misuse_array_view_shape(x):
    return N.array_view(8, (x,), np.float32)


@numba.njit
def _misuse_error_create(x):
    return N.error_create(x, 0, 3)


@numba.njit
def _misuse_stream_get(x):
    return N.stream_get(x)


@numba.njit
def _misuse_reader(x):
    return N.buffer_dim(x, 0)


@numba.njit
def _misuse_reader_index(x):
    return N.arg_buffer(1, x)


@pytest.mark.parametrize(
    ("fn", "arg", "message"),
    [
        (_misuse_reader, 1.5, "buffer_dim(buf: int, i: int)"),
        (_misuse_error_create, 1.5, "error_create(api, message, code) takes integers"),
        (_misuse_stream_get, 1.5, "stream_get(frame) takes integers"),
        (_misuse_array_view, 1.5, _ARRAY_VIEW_USAGE),
        (_misuse_array_view_shape, 1.5, _ARRAY_VIEW_USAGE),
        (_misuse_reader_index, 0.5, "arg_buffer(frame: int, i: int)"),
        (_misuse_load, 1.5, "load(address: int, ty: numba scalar type)"),
        (_misuse_load_at, 4, "load_at(address: int, offset: literal int, ty: numba scalar type)"),
        (
            _misuse_store_at,
            4,
            "store_at(address: int, offset: literal int, value, ty: numba scalar type)",
        ),
        (_misuse_load_type, 1, "load(address: int, ty: numba scalar type)"),
        (_misuse_store, 1.5, "store(address: int, value, ty: numba scalar type)"),
        (_misuse_voidptr, 1.5, "voidptr(address: int)"),
        (_misuse_cstring, "runtime text", "cstring(text) needs a string literal"),
        (_misuse_call_api_fn, 1.5, "call_api_fn(fn: int, arg: int)"),
        (_misuse_stack_buffer, 8, "stack_buffer(nbytes) needs an integer literal"),
        (_misuse_guarded_fn, 0, "call_guarded: `fn` must be an @njit function"),
        (_misuse_guarded_name, 1.5, "call_guarded(fn, api, name: C string address, args: tuple)"),
        (_misuse_guarded_args, 0, "call_guarded(fn, api, name: C string address, args: tuple)"),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_intrinsic_typing_errors(fn: object, arg: object, message: str) -> None:
    # Numba wraps the intrinsic's message in its own report of the failed typing.
    with pytest.raises(numba.core.errors.TypingError, match=re.escape(message)):
        fn(arg)  # type: ignore[operator]


@numba.njit
def _views(address):
    # The same 6 float32 seen as a scalar, a vector and a matrix.
    scalar = N.array_view(address, (), np.float32)
    vector = N.array_view(address, (6,), np.float32)
    matrix = N.array_view(address, (2, 3), np.float32)
    matrix[1, 2] = 50.0  # writes through to the memory
    return scalar[()], vector.sum(), matrix[1, 0], matrix.strides, vector[5]


def test_array_view_is_a_c_contiguous_array_over_the_memory() -> None:
    data = np.arange(6, dtype=np.float32)
    first, total, at_1_0, strides, last = _views(data.ctypes.data)
    assert (first, total, at_1_0, strides) == (0.0, 60.0, 3.0, (12, 4))  # 5 became 50
    assert last == 50.0 and data[5] == 50.0


def test_reader_follows_its_path() -> None:
    # A table of two pointers, each to a struct whose int32 at offset 4 is read.
    from ffi_core.abi.native._intrinsics import reader

    read = reader(
        "second_field",
        ("table", "i"),
        (("index", 8), ("deref", 0), ("read", 4)),
        types.int32,
        doc="The int32 at offset 4 of the struct that entry ``i`` points to.",
        module=__name__,
    )
    structs = np.array([[1, 10], [2, 20]], dtype=np.int32)
    table = np.array([structs[0].ctypes.data, structs[1].ctypes.data], dtype=np.uintp)

    @numba.njit
    def both(address):
        return read(address, 0), read(address, 1)

    assert both(table.ctypes.data) == (10, 20)
    assert str(inspect.signature(read)) == "(table, i)"
    assert read.__doc__.startswith("The int32 at offset 4")


@pytest.mark.parametrize(
    ("params", "path", "message"),
    [
        (
            ("a",),
            (("deref", 0),),
            "bad: a path is deref/index steps then one read, got (('deref', 0),)",
        ),
        (
            ("a",),
            (("read", 0), ("read", 8)),
            "bad: a path is deref/index steps then one read, got (('read', 0), ('read', 8))",
        ),
        (
            ("a",),
            (("index", 8), ("read", 0)),
            "bad: takes the address, and an index where the path has one",
        ),
        (("a", "i"), (("read", 0),), "bad: takes the address, and an index where the path has one"),
    ],
)
def test_reader_refuses_a_path_it_cannot_follow(params, path, message) -> None:
    from ffi_core.abi.native._intrinsics import reader
    from ffi_core.testing import raises_exactly

    with raises_exactly(ValueError, message):
        reader("bad", params, path, types.int32, doc="", module=__name__)


def test_stack_buffer_is_zeroed_and_writable() -> None:
    @numba.njit
    def scratch():
        address = N.stack_buffer(24)
        first = N.load(address, types.int64) + N.load(address + 16, types.int64)
        N.store(address + 8, 99, types.int64)
        return first, N.load(address + 8, types.int64)

    assert scratch() == (0, 99)


_void2 = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
_void3 = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


@_void2
def _record2(a, b):
    ctypes.c_int64.from_address(a).value = b - a


@_void3
def _record3(a, b, c):
    ctypes.c_int64.from_address(a).value = b + c


def test_call_void_fn_passes_each_pointer() -> None:
    f2 = ctypes.cast(_record2, ctypes.c_void_p).value
    f3 = ctypes.cast(_record3, ctypes.c_void_p).value

    @numba.njit
    def call(f2, f3):
        slot = N.stack_buffer(8)
        N.call_void_fn(f2, (slot, slot + 40))
        first = N.load(slot, types.int64)
        N.call_void_fn(f3, (slot, 5, 9))
        return first, N.load(slot, types.int64)

    assert call(f2, f3) == (40, 14)


def test_call_void_fn_typing_error() -> None:
    @numba.njit
    def call():
        N.call_void_fn(1, (2.0,))

    with pytest.raises(
        numba.core.errors.TypingError,
        match=re.escape("call_void_fn(fn: int, args: tuple of int)"),
    ):
        call()


_MIXED = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_int64)


@_MIXED
def _mixed(a, b, c):
    return (a + 10 * b + 100 * c) % 2**31


def test_call_c_passes_each_argument_with_its_type_and_returns_the_result() -> None:
    fn = ctypes.cast(_mixed, ctypes.c_void_p).value

    @numba.njit
    def call(fn):
        return N.call_c(fn, types.int32, (types.uintp(1), types.uint32(2), types.int64(-3)))

    assert call(fn) == (1 + 20 - 300) % 2**31


@pytest.mark.parametrize(
    "misuse",
    [
        lambda: N.call_c(1.0, types.int32, (types.uintp(1),)),
        lambda: N.call_c(1, types.float64, (types.uintp(1),)),
        lambda: N.call_c(1, types.int32, (2.0,)),
        lambda: N.call_c(1, types.int32, 3),
    ],
)
def test_call_c_typing_error(misuse) -> None:
    call = numba.njit(misuse)
    with pytest.raises(
        numba.core.errors.TypingError,
        match=re.escape("call_c(fn: int, restype: an integer type, args: tuple of int)"),
    ):
        call()


# --- native handlers ---------------------------------------------------------


@numba.njit
def add_kernel(a, b, out):
    for i in range(out.shape[0]):
        if a[i] == 7:
            raise ValueError("seven is not allowed")
        out[i] = a[i] + b[i]


@numba.cfunc(types.uintp(types.uintp))
def add_handler(frame):
    if N.is_metadata_query(frame):
        return N.answer_metadata(frame, 0)
    api = N.frame_api(frame)
    b0 = N.arg_buffer(frame, 0)
    b1 = N.arg_buffer(frame, 1)
    r0 = N.ret_buffer(frame, 0)
    a = numba.carray(N.voidptr(N.buffer_data(b0)), (N.buffer_dim(b0, 0),), np.float32)
    b = numba.carray(N.voidptr(N.buffer_data(b1)), (N.buffer_dim(b1, 0),), np.float32)
    out = numba.carray(N.voidptr(N.buffer_data(r0)), (N.buffer_dim(r0, 0),), np.float32)
    return N.call_guarded(add_kernel, api, N.cstring("numba kernel add"), (a, b, out))


@numba.njit
def divide_kernel(a, out):
    for i in range(out.shape[0]):
        out[i] = 10 // a[i]


@numba.njit
def bare_raise_kernel(a, out):
    if a[0] == 1:
        raise ValueError
    out[0] = a[0]


def _int32_handler(kernel, label):
    # One cfunc per kernel; the kernel's name is a literal of each.
    if label == "divide":

        @numba.cfunc(types.uintp(types.uintp))
        def handler(frame):
            if N.is_metadata_query(frame):
                return N.answer_metadata(frame, 0)
            b0 = N.arg_buffer(frame, 0)
            r0 = N.ret_buffer(frame, 0)
            a = numba.carray(N.voidptr(N.buffer_data(b0)), (N.buffer_dim(b0, 0),), np.int32)
            o = numba.carray(N.voidptr(N.buffer_data(r0)), (N.buffer_dim(r0, 0),), np.int32)
            return N.call_guarded(kernel, N.frame_api(frame), N.cstring("divide"), (a, o))

    else:

        @numba.cfunc(types.uintp(types.uintp))
        def handler(frame):
            if N.is_metadata_query(frame):
                return N.answer_metadata(frame, 0)
            b0 = N.arg_buffer(frame, 0)
            r0 = N.ret_buffer(frame, 0)
            a = numba.carray(N.voidptr(N.buffer_data(b0)), (N.buffer_dim(b0, 0),), np.int32)
            o = numba.carray(N.voidptr(N.buffer_data(r0)), (N.buffer_dim(r0, 0),), np.int32)
            return N.call_guarded(kernel, N.frame_api(frame), N.cstring("bare"), (a, o))

    return handler


@numba.cfunc(types.uintp(types.uintp))
def probe_handler(frame):
    """Writes what the native accessors read: dtype, rank, argument and result
    counts, stage, device ordinal, then the dims (padded with -1)."""
    if N.is_metadata_query(frame):
        return N.answer_metadata(frame, 0)
    buf = N.arg_buffer(frame, 0)
    r0 = N.ret_buffer(frame, 0)
    out = numba.carray(N.voidptr(N.buffer_data(r0)), (N.buffer_dim(r0, 0),), np.int32)
    error, ordinal = N.device_ordinal_get(frame)
    if error != 0:
        return error
    out[0] = N.buffer_dtype(buf)
    out[1] = N.buffer_rank(buf)
    out[2] = N.num_args(frame)
    out[3] = N.num_rets(frame)
    out[4] = N.frame_stage(frame)
    out[5] = ordinal
    for i in range(out.shape[0] - 6):
        out[6 + i] = N.buffer_dim(buf, i) if i < N.buffer_rank(buf) else -1
    return 0


@numba.cfunc(types.uintp(types.uintp))
def stream_handler(frame):
    if N.is_metadata_query(frame):
        return N.answer_metadata(frame, 0)
    error, _stream = N.stream_get(frame)
    return error


@numba.cfunc(types.uintp(types.uintp))
def error_code_handler(frame):
    """Fails with the error code given as the first int32 of its argument."""
    if N.is_metadata_query(frame):
        return N.answer_metadata(frame, 0)
    code = N.load(N.buffer_data(N.arg_buffer(frame, 0)), types.int32)
    return N.error_create(N.frame_api(frame), N.cstring("native error"), code)


@numba.cfunc(types.uintp(types.uintp))
def attrs_handler(frame):
    """Writes, per attribute: its type, name length, scalar dtype and the
    scalar's value as float64 (for the float32/int64/int32 scalars it is sent)."""
    if N.is_metadata_query(frame):
        return N.answer_metadata(frame, 0)
    r0 = N.ret_buffer(frame, 0)
    out = numba.carray(N.voidptr(N.buffer_data(r0)), (N.buffer_dim(r0, 0),), np.float64)
    out[0] = N.num_attrs(frame)
    for i in range(N.num_attrs(frame)):
        dtype = N.attr_scalar_dtype(frame, i)
        value = N.attr_scalar_value(frame, i)
        out[1 + 4 * i] = N.attr_type(frame, i)
        out[2 + 4 * i] = N.attr_name_size(frame, i)
        out[3 + 4 * i] = dtype
        if dtype == 11:
            out[4 + 4 * i] = N.load(value, types.float32)
        elif dtype == 5:
            out[4 + 4 * i] = N.load(value, types.int64)
        else:
            out[4 + 4 * i] = N.load(value, types.int32)
    return 0


@numba.cfunc(types.uintp(types.uintp))
def array_attr_handler(frame):
    """Writes the one attribute's type, dtype, size and int64 elements."""
    if N.is_metadata_query(frame):
        return N.answer_metadata(frame, 0)
    r0 = N.ret_buffer(frame, 0)
    out = numba.carray(N.voidptr(N.buffer_data(r0)), (N.buffer_dim(r0, 0),), np.int32)
    out[0] = N.attr_type(frame, 0)
    out[1] = N.attr_scalar_dtype(frame, 0)
    out[2] = N.attr_array_size(frame, 0)
    for i in range(N.attr_array_size(frame, 0)):
        out[3 + i] = N.load(N.attr_array_data(frame, 0) + 8 * i, types.int64)
    return 0


def test_native_array_attribute(cpu: jax.Device) -> None:
    name = _register("ffi_core_tests.native_array_attr", array_attr_handler)
    f = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((6,), jnp.int32))
    out = jax.jit(lambda: f(dims=np.array([4, 0, 2**31 - 1], np.int64)))()
    array, s64 = int(ffi_core.abi.capi.AttrType.ARRAY), int(ffi_core.abi.DataType.S64)
    assert np.asarray(out).tolist() == [array, s64, 3, 4, 0, 2**31 - 1]


def test_native_scalar_attributes_arrive_sorted_by_name(cpu: jax.Device) -> None:
    name = _register("ffi_core_tests.native_attrs", attrs_handler)
    f = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((13,), jnp.float64))
    with jax.enable_x64(True) if hasattr(jax, "enable_x64") else jax.experimental.enable_x64():
        out = jax.jit(lambda: f(zeta=np.float32(1.5), alpha=np.int64(-3), mid=np.int32(7)))()
    scalar = float(ffi_core.abi.capi.AttrType.SCALAR)
    assert np.asarray(out).tolist() == [
        3.0,
        *(scalar, 5.0, 5.0, -3.0),  # alpha: int64 (S64 = 5)
        *(scalar, 3.0, 4.0, 7.0),  # mid: int32 (S32 = 4)
        *(scalar, 4.0, 11.0, 1.5),  # zeta: float32 (F32 = 11)
    ]


def _register(prefix: str, handler: object) -> str:
    name = ffi_core.bridge.target_name(prefix, "v1")
    ffi_core.bridge.register_target(name, handler, content="v1")
    return name


@pytest.mark.parametrize("size", [0, 1, 7, 1000])
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_native_add(size: int, jit: bool, cpu: jax.Device) -> None:
    name = _register("ffi_core_tests.native_add", add_handler)
    a = jax.device_put(jnp.linspace(-3.0, 3.0, size, dtype=jnp.float32), cpu)
    b = jax.device_put(jnp.full((size,), 0.5, jnp.float32), cpu)
    f = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(a.shape, a.dtype))
    out = (jax.jit(f) if jit else f)(a, b)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(a) + np.asarray(b))


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_native_kernel_exception(warm: bool, cpu: jax.Device) -> None:
    name = _register(f"ffi_core_tests.native_raise_{'warm' if warm else 'cold'}", add_handler)
    x = jax.device_put(jnp.arange(4, dtype=jnp.float32), cpu)
    f = jax.jit(jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(x.shape, x.dtype)))
    if warm:
        f(x, x).block_until_ready()
    message = "UNKNOWN: numba kernel add raised ValueError: seven is not allowed"
    with pytest.raises(RUNTIME_ERRORS, match=re.escape(message)):
        f(x + 5, x).block_until_ready()
    np.testing.assert_array_equal(np.asarray(f(x, x + 1)), [1.0, 3.0, 5.0, 7.0])


@pytest.mark.parametrize(
    ("label", "kernel", "failing", "message", "passing", "first"),
    [
        (
            "divide",
            divide_kernel,
            [5, 0, 2],
            "divide raised ZeroDivisionError: integer division by zero",
            [5, 1, 2],
            2,
        ),
        ("bare", bare_raise_kernel, [1, 0, 0], "bare raised ValueError", [3, 0, 0], 3),
    ],
    ids=["zero-division", "no-message"],
)
def test_native_exception_formats(
    label: str,
    kernel: object,
    failing: list[int],
    message: str,
    passing: list[int],
    first: int,
    cpu: jax.Device,
) -> None:
    name = _register(f"ffi_core_tests.native_{label}", _int32_handler(kernel, label))
    f = jax.jit(jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((3,), jnp.int32)))
    with pytest.raises(RUNTIME_ERRORS, match=re.escape(f"UNKNOWN: {message}")):
        f(jax.device_put(jnp.array(failing, jnp.int32), cpu)).block_until_ready()
    assert int(f(jax.device_put(jnp.array(passing, jnp.int32), cpu))[0]) == first


@pytest.mark.parametrize(
    ("dtype", "shape"),
    [
        (np.float32, (5,)),
        (np.float32, (2, 3)),
        (np.int32, (4, 1, 2)),
        (np.uint8, ()),
        (np.int16, (1, 2, 3, 4)),
        (np.complex64, (0,)),
    ],
    ids=str,
)
def test_native_buffer_accessors(dtype: type, shape: tuple[int, ...], cpu: jax.Device) -> None:
    name = _register("ffi_core_tests.native_probe", probe_handler)
    x = jax.device_put(jnp.zeros(shape, dtype), cpu)
    out = jax.jit(jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((10,), jnp.int32)))(x)
    dims = [*shape, *[-1] * (4 - len(shape))]
    expected = [ffi_core.abi.code_from_dtype(dtype), len(shape), 1, 1, 3, cpu.id, *dims]
    assert np.asarray(out).tolist() == expected


def test_native_buffer_dtype_of_float32_is_11(cpu: jax.Device) -> None:
    name = _register("ffi_core_tests.native_probe", probe_handler)
    x = jax.device_put(jnp.zeros((3,), jnp.float32), cpu)
    out = jax.jit(jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((10,), jnp.int32)))(x)
    assert np.asarray(out)[:2].tolist() == [11, 1]


@pytest.mark.parametrize("device_index", range(len(jax.devices("cpu"))))
def test_native_device_ordinal(device_index: int) -> None:
    device = jax.devices("cpu")[device_index]
    name = _register("ffi_core_tests.native_probe", probe_handler)
    x = jax.device_put(jnp.zeros((1,), jnp.float32), device)
    out = jax.jit(jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((10,), jnp.int32)))(x)
    assert int(np.asarray(out)[5]) == device.id


def test_native_stream_on_cpu_is_an_error(cpu: jax.Device) -> None:
    name = _register("ffi_core_tests.native_stream", stream_handler)
    x = jax.device_put(jnp.zeros((1,), jnp.float32), cpu)
    f = jax.jit(jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(x.shape, x.dtype)))
    with pytest.raises(RUNTIME_ERRORS, match=re.escape("XLA FFI GPU context is not available")):
        f(x).block_until_ready()


@pytest.mark.parametrize(
    "code",
    [ErrorCode.INVALID_ARGUMENT, ErrorCode.NOT_FOUND, ErrorCode.INTERNAL],
    ids=lambda c: c.name,
)
def test_native_error_create(code: ErrorCode, cpu: jax.Device) -> None:
    name = _register("ffi_core_tests.native_error_code", error_code_handler)
    x = jax.device_put(jnp.full((1,), int(code), jnp.int32), cpu)
    f = jax.jit(jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(x.shape, x.dtype)))
    with pytest.raises(RUNTIME_ERRORS, match=re.escape(f"{code.name}: native error")):
        f(x).block_until_ready()


# --- error_from_exception ------------------------------------------------------


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


_KERNEL_NAME = ctypes.create_string_buffer(b"my kernel")


@pytest.mark.parametrize(
    ("exc_type", "exc_value", "message"),
    [
        (ValueError, ValueError("bad"), "my kernel raised ValueError: bad"),
        (ValueError, "bad", "my kernel raised ValueError: bad"),
        (ValueError, None, "my kernel raised ValueError"),
        (KeyError, ("k",), "my kernel raised KeyError: 'k'"),
        (IndexError, ("a", 3), "my kernel raised IndexError: ('a', 3)"),
        (_Unprintable, _Unprintable(), "my kernel raised an exception that could not be formatted"),
    ],
    ids=["normalized", "unnormalized", "no-args", "tuple-arg", "tuple-args", "unprintable"],
)
def test_error_from_exception(
    exc_type: type, exc_value: object, message: str, ffi_api: int
) -> None:
    address = ctypes.addressof(_KERNEL_NAME)
    error = N.error_from_exception(ffi_api, address, exc_type, exc_value)
    assert error != 0
    assert ffi_core.abi.error_message(ffi_api, error) == message
    ffi_core.abi.destroy_error(ffi_api, error)


# --- error_destroy and first_error ------------------------------------------------


@numba.njit
def _destroy(api, error):
    N.error_destroy(api, error)


def test_error_destroy(ffi_api: int) -> None:
    error = ffi_core.abi.create_error(ffi_api, "to be destroyed")
    _destroy(ffi_api, error)  # frees it; a double free would crash the process


@pytest.mark.parametrize(
    "layout",
    [[], [0, 0], [1], [0, 1], [1, 1, 1], [0, 1, 0, 1, 1]],
    ids=str,
)
def test_first_error(layout: list[int], ffi_api: int) -> None:
    errors = np.array(
        [
            ffi_core.abi.create_error(ffi_api, f"error {i}") if used else 0
            for i, used in enumerate(layout)
        ],
        dtype=np.uintp,
    )
    first = N.first_error(ffi_api, errors)
    if not any(layout):
        assert first == 0
        return
    index = layout.index(1)
    assert first == errors[index]
    # The first survives with its message; first_error destroyed the others.
    assert ffi_core.abi.error_message(ffi_api, first) == f"error {index}"
    ffi_core.abi.destroy_error(ffi_api, first)


# --- error_create_prefixed -----------------------------------------------------

_PREFIX = ctypes.create_string_buffer(b"my kernel")
_SHORT = ctypes.create_string_buffer(b"went wrong")
_LONG_PREFIX = ctypes.create_string_buffer(b"p" * 3000)
_LONG = ctypes.create_string_buffer(b"m" * 3000)
_PREFIX_AT, _SHORT_AT = ctypes.addressof(_PREFIX), ctypes.addressof(_SHORT)
_LONG_PREFIX_AT, _LONG_AT = ctypes.addressof(_LONG_PREFIX), ctypes.addressof(_LONG)


@numba.cfunc(types.uintp(types.uintp))
def prefixed_error_handler(frame):
    """Fails with "<prefix>: <message>": short ones when its argument holds 0,
    3,000 bytes of each otherwise."""
    if N.is_metadata_query(frame):
        return N.answer_metadata(frame, 0)
    api = N.frame_api(frame)
    if N.load(N.buffer_data(N.arg_buffer(frame, 0)), types.int32) == 0:
        return N.error_create_prefixed(api, _PREFIX_AT, _SHORT_AT, 3)
    return N.error_create_prefixed(api, _LONG_PREFIX_AT, _LONG_AT, 3)


def test_error_create_prefixed_joins_and_cuts_at_its_capacity(cpu: jax.Device) -> None:
    from ffi_core.abi.native._frame import PREFIXED_BYTES

    name = _register("ffi_core_tests.native_error_prefixed", prefixed_error_handler)

    def fail(flag: int) -> str:
        x = jax.device_put(jnp.full((1,), flag, jnp.int32), cpu)
        f = jax.jit(jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(x.shape, x.dtype)))
        with pytest.raises(RUNTIME_ERRORS) as raised:
            f(x).block_until_ready()
        return str(raised.value)

    assert "INVALID_ARGUMENT: my kernel: went wrong" in fail(0)
    # 3,000 + 2 + 3,000 bytes: cut to the capacity, less the terminating NUL.
    text = "p" * 3000 + ": " + "m" * (PREFIXED_BYTES - 1 - 3002)
    message = fail(1)
    assert text in message and text + "m" not in message


def test_handler_name_covers_source_parts_and_the_native_helpers(monkeypatch) -> None:
    from ffi_core.abi.native import _disk_cache

    name = N.handler_name("h_", "def handler(): ...", ["numba 0.61"])
    assert re.fullmatch(r"h_[0-9a-f]{24}", name)
    assert N.handler_name("h_", "def handler(): ...", ["numba 0.61"]) == name
    assert N.handler_name("h_", "def handler(): pass", ["numba 0.61"]) != name
    assert N.handler_name("h_", "def handler(): ...", ["numba 0.62"]) != name
    # Other code in the helpers every handler inlines: another name, whatever
    # the versions say.
    monkeypatch.setattr(_disk_cache, "_native_code", lambda: b"other helpers")
    assert N.handler_name("h_", "def handler(): ...", ["numba 0.61"]) != name


def test_the_native_code_digest_follows_the_helpers_source(tmp_path, monkeypatch) -> None:
    from ffi_core.abi.native import _disk_cache

    assert "ffi_core.abi.native._frame" in _disk_cache.NATIVE_MODULES
    helper = tmp_path / "stand_in_helpers.py"
    helper.write_text("OFFSET = 8\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_disk_cache, "NATIVE_MODULES", ("stand_in_helpers",))
    _disk_cache._native_code.cache_clear()
    before = _disk_cache._native_code()
    helper.write_text("OFFSET = 16\n")
    _disk_cache._native_code.cache_clear()
    after = _disk_cache._native_code()
    _disk_cache._native_code.cache_clear()
    assert before != after


def test_a_bad_cache_file_that_cannot_be_deleted_is_said_to_stay(tmp_path, monkeypatch) -> None:
    # A cache directory that is read-only: the file stays, and the warning says so.
    from ffi_core.abi.native import _disk_cache

    bad = tmp_path / "k.nbi"
    bad.write_bytes(b"garbage")

    def refuse(path: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_disk_cache.os, "unlink", refuse)
    message = (
        f"the cache file {str(bad)!r} is broken; it is ignored (it cannot be deleted: "
        "Permission denied) and the handler is compiled again"
    )
    with pytest.warns(N.HandlerCacheWarning, match=f"^{re.escape(message)}$"):
        _disk_cache._discard(str(bad), None, "is broken", "the cache")
    assert bad.exists()


def test_an_entry_is_saved_under_the_directory_lock(tmp_path, monkeypatch) -> None:
    # Two processes saving other keys at once must not pick the same data file.
    import fcntl

    from ffi_core.abi.native import _disk_cache

    held = []

    def save(self, key, data):
        fd = os.open(tmp_path / ".lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held.append(key)
        finally:
            os.close(fd)

    monkeypatch.setattr(_disk_cache.IndexDataCacheFile, "save", save)
    file = object.__new__(_disk_cache._ChecksummedCacheFile)
    file._cache_path = str(tmp_path)
    file.save("key", b"data")
    assert held == ["key"]
