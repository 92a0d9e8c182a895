"""Call-frame operations compiled with Numba, for handlers that run no Python.

Every offset comes from the ctypes structures in :mod:`ffi_core.abi.capi`, the
one description of the ABI. The readers of one field (``arg_buffer``,
``buffer_dim``, ``num_args``, ...) are intrinsics made by ``reader``, and the
helpers that fill an args struct and call the API (``error_create``,
``stream_get``, ``answer_metadata``, ...) are intrinsics too: each call is a
handful of loads, stores and calls emitted straight into the handler, with no
Numba IR to type or inline (compiling a handler was mostly that). Only
``error_create_prefixed`` and ``first_error`` are compiled functions, once per
process.
"""

from __future__ import annotations

import ctypes
import inspect
from typing import Any

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

from .. import _capi as C
from .._api_version import api_version
from ._intrinsics import Emit, listed, load, reader, stack_buffer, store

# The public names are listed once, in the package's ``__all__``.

_PTR = ctypes.sizeof(ctypes.c_void_p)
_u = types.uintp
_i32 = types.int32
_i64 = types.int64
_u32 = types.uint32
_size_t = types.uintp


def _offsets(struct, *fields: str) -> tuple[int, ...]:
    # The offsets of one struct's fields, in the order named.
    return tuple(C.offset_of(struct, field) for field in fields)


def _args_struct(struct, last: str, *fields: str) -> tuple[int, ...]:
    # An API function's args struct: the struct_size to declare (up to the
    # last field this header version knows), the bytes to reserve, and the
    # offsets of ``fields``.
    return (C.struct_size(struct, last), ctypes.sizeof(struct), *_offsets(struct, *fields))


# Offsets, named after the C fields they address.
_FRAME_EXT, _FRAME_ARGS, _FRAME_RETS, _FRAME_API, _FRAME_CTX = _offsets(
    C.XLA_FFI_CallFrame, "extension_start", "args.args", "rets.rets", "api", "ctx"
)
_FRAME_ATTRS_TYPES, _FRAME_ATTRS_NAMES, _FRAME_ATTRS = _offsets(
    C.XLA_FFI_CallFrame, "attrs.types", "attrs.names", "attrs.attrs"
)
(_SPAN_LEN,) = _offsets(C.XLA_FFI_ByteSpan, "len")
_ENUM = ctypes.sizeof(ctypes.c_int)
(_EXT_TYPE,) = _offsets(C.XLA_FFI_Extension_Base, "type")
(_EXT_METADATA,) = _offsets(C.XLA_FFI_Metadata_Extension, "metadata")
_META_SIZE, _META_VERSION, _META_TRAITS, _META_STATE = _offsets(
    C.XLA_FFI_Metadata, "struct_size", "api_version", "traits", "state_type_id"
)
_META_FULL_SIZE = C.struct_size(C.XLA_FFI_Metadata)
_VER_SIZE, _VER_EXT, _VER_MAJOR, _VER_MINOR = _offsets(
    C.XLA_FFI_Api_Version, "struct_size", "extension_start", "major_version", "minor_version"
)
_VER_STRUCT_SIZE = C.struct_size(C.XLA_FFI_Api_Version, "minor_version")
(_BUF_DIMS,) = _offsets(C.XLA_FFI_Buffer, "dims")
_API_ERROR_CREATE, _API_ERROR_DESTROY, _API_STREAM_GET, _API_ORDINAL_GET = _offsets(
    C.XLA_FFI_Api,
    "XLA_FFI_Error_Create",
    "XLA_FFI_Error_Destroy",
    "XLA_FFI_Stream_Get",
    "XLA_FFI_DeviceOrdinal_Get",
)
_ERR_SIZE, _ERR_BYTES, _ERR_MESSAGE, _ERR_CODE = _args_struct(
    C.XLA_FFI_Error_Create_Args, "errc", "message", "errc"
)
_DESTROY_SIZE, _DESTROY_BYTES, _DESTROY_ERROR = _args_struct(
    C.XLA_FFI_Error_Destroy_Args, "error", "error"
)
_STREAM_SIZE, _STREAM_BYTES, _STREAM_CTX, _STREAM_OUT = _args_struct(
    C.XLA_FFI_Stream_Get_Args, "stream", "ctx", "stream"
)
_ORD_SIZE, _ORD_BYTES, _ORD_CTX, _ORD_OUT = _args_struct(
    C.XLA_FFI_DeviceOrdinal_Get_Args, "device_ordinal", "ctx", "device_ordinal"
)
_METADATA = int(C.ExtensionType.METADATA)
_MAJOR, _MINOR = api_version()

_njit = numba.njit(cache=False)
# For functions only compiled code calls: no Python or C wrapper to build, no
# reference counting (the options numba's stubs do not declare).
_njit_native = numba.njit(  # type: ignore[call-overload]
    cache=False, no_cpython_wrapper=True, no_cfunc_wrapper=True, _nrt=False
)


# Readers of one field of the call frame, of a buffer or of an attribute.
_Frame = C.XLA_FFI_CallFrame
_Buffer = C.XLA_FFI_Buffer
_Scalar = C.XLA_FFI_Scalar
_Array = C.XLA_FFI_Array
_HOLDER = {_Frame: "frame", _Buffer: "buf"}


def _reader(name: str, params: str, path: tuple[tuple[str, int], ...], ty, doc: str):
    return reader(name, tuple(params.split()), path, ty, doc=doc, module=__name__)


def _field(name: str, struct, field: str, ty, doc: str):
    # A field of the struct the argument points to.
    return _reader(name, _HOLDER[struct], (("read", C.offset_of(struct, field)),), ty, doc)


def _attr_field(name: str, struct, field: str, ty, doc: str):
    # A field of the struct attribute ``i`` points to.
    path = (("deref", _FRAME_ATTRS), ("index", _PTR), ("deref", 0))
    return _reader(name, "frame i", (*path, ("read", C.offset_of(struct, field))), ty, doc)


frame_api = _field("frame_api", _Frame, "api", _u, "The frame's ``XLA_FFI_Api*``.")
frame_ctx = _field("frame_ctx", _Frame, "ctx", _u, "The frame's ``XLA_FFI_ExecutionContext*``.")
frame_stage = _field(
    "frame_stage", _Frame, "stage", _i32, "The frame's ``XLA_FFI_ExecutionStage``."
)
num_args = _field("num_args", _Frame, "args.size", _i64, "How many arguments the call has.")
num_rets = _field("num_rets", _Frame, "rets.size", _i64, "How many results the call has.")
num_attrs = _field("num_attrs", _Frame, "attrs.size", _i64, "How many attributes (sorted by name).")
buffer_dtype = _field("buffer_dtype", _Buffer, "dtype", _i32, "A buffer's ``XLA_FFI_DataType``.")
buffer_data = _field("buffer_data", _Buffer, "data", _u, "The address of a buffer's data.")
buffer_rank = _field("buffer_rank", _Buffer, "rank", _i64, "The rank of a buffer.")
attr_scalar_dtype = _attr_field(
    "attr_scalar_dtype", _Scalar, "dtype", _i32, "The dtype of scalar (or array) attribute ``i``."
)
attr_scalar_value = _attr_field(
    "attr_scalar_value", _Scalar, "value", _u, "The address of scalar attribute ``i``'s value."
)
attr_array_size = _attr_field(
    "attr_array_size",
    _Array,
    "size",
    _size_t,
    "The element count of array attribute ``i`` (its dtype: ``attr_scalar_dtype``).",
)
attr_array_data = _attr_field(
    "attr_array_data", _Array, "data", _u, "The address of array attribute ``i``'s data."
)


class _Emit(Emit):
    """:class:`Emit` with the call frame's own request: ask the API for a
    value of the call's execution context."""

    def ask_context(
        self, frame: ir.Value, size: int, nbytes: int, ctx_at: int, entry: int
    ) -> ir.Value:
        # Fill an args struct that carries the execution context and ask the
        # API; returns the struct's address (the error is ``self.error``).
        args = self.stack(nbytes)
        self.store(args, 0, self.const(_size_t, size), _size_t)
        self.store(args, ctx_at, self.load(frame, _FRAME_CTX, _u), _u)
        self.error = self.call_api(self.load(frame, _FRAME_API, _u), entry, args)
        return args


def _helper(typer: Any) -> Any:
    # An intrinsic listed (help(), the API listing) with the call's own
    # parameters: ``typingctx`` left out.
    return listed(intrinsic(typer), list(inspect.signature(typer).parameters.values())[1:])


def _integers(name: str, *args: Any) -> None:
    # Addresses and codes: integers, or members of an IntEnum (``ErrorCode``).
    if not all(isinstance(a, types.Integer | types.IntEnumMember) for a in args):
        raise TypingError(f"{name} takes integers (addresses, codes), got {args}")


@_helper
def is_metadata_query(typingctx, frame):
    """True when XLA is asking the handler for its metadata, not running it."""
    _integers("is_metadata_query(frame)", frame)

    def codegen(context, builder, sig, args):
        e = _Emit(context, builder)
        ext = e.load(e.arg(args[0], sig.args[0]), _FRAME_EXT, _u)
        found = cgutils.alloca_once_value(builder, cgutils.false_bit)
        with builder.if_then(builder.icmp_unsigned("!=", ext, e.const(_u, 0))):
            kind = e.load(ext, _EXT_TYPE, _i32)
            builder.store(builder.icmp_signed("==", kind, e.const(_i32, _METADATA)), found)
        return builder.load(found)

    return types.boolean(frame), codegen


@_helper
def answer_metadata(typingctx, frame, traits):
    """Fill the metadata extension: API version of the installed jaxlib,
    ``traits`` and no state type. Returns a null error (0)."""
    _integers("answer_metadata(frame, traits)", frame, traits)

    def codegen(context, builder, sig, args):
        e = _Emit(context, builder)
        ext = e.load(e.arg(args[0], sig.args[0]), _FRAME_EXT, _u)
        meta = e.load(ext, _EXT_METADATA, _u)
        e.store(meta, _META_VERSION + _VER_SIZE, e.const(_size_t, _VER_STRUCT_SIZE), _size_t)
        e.store(meta, _META_VERSION + _VER_EXT, e.const(_u, 0), _u)
        e.store(meta, _META_VERSION + _VER_MAJOR, e.const(_i32, _MAJOR), _i32)
        e.store(meta, _META_VERSION + _VER_MINOR, e.const(_i32, _MINOR), _i32)
        e.store(meta, _META_TRAITS, e.arg(args[1], sig.args[1], _u32), _u32)
        # Older frameworks allocate the struct without the trailing state_type_id.
        size = e.load(meta, _META_SIZE, _size_t)
        with builder.if_then(builder.icmp_unsigned(">=", size, e.const(_size_t, _META_FULL_SIZE))):
            e.store(meta, _META_STATE, e.const(_i64, 0), _i64)
        return e.const(_u, 0)

    return _u(frame, traits), codegen


arg_buffer = _reader(
    "arg_buffer",
    "frame i",
    (("deref", _FRAME_ARGS), ("index", _PTR), ("read", 0)),
    _u,
    "The ``XLA_FFI_Buffer*`` of argument ``i``.",
)


ret_buffer = _reader(
    "ret_buffer",
    "frame i",
    (("deref", _FRAME_RETS), ("index", _PTR), ("read", 0)),
    _u,
    "The ``XLA_FFI_Buffer*`` of result ``i``.",
)


attr_type = _reader(
    "attr_type",
    "frame i",
    (("deref", _FRAME_ATTRS_TYPES), ("index", _ENUM), ("read", 0)),
    _i32,
    "The ``XLA_FFI_AttrType`` of attribute ``i`` (3 for a scalar).",
)


attr_name_size = _reader(
    "attr_name_size",
    "frame i",
    (("deref", _FRAME_ATTRS_NAMES), ("index", _PTR), ("deref", 0), ("read", _SPAN_LEN)),
    _size_t,
    "The length in bytes of attribute ``i``'s name.",
)


buffer_dim = _reader(
    "buffer_dim",
    "buf i",
    (("deref", _BUF_DIMS), ("index", 8), ("read", 0)),
    _i64,
    "Size ``i`` of a buffer's shape.",
)


@_helper
def error_create(typingctx, api, message, code):
    """An ``XLA_FFI_Error*`` with the NUL-terminated ``message`` (an address,
    e.g. from ``cstring``) and error ``code``; XLA copies the message."""
    _integers("error_create(api, message, code)", api, message, code)

    def codegen(context, builder, sig, args):
        e = _Emit(context, builder)
        struct = e.stack(_ERR_BYTES)
        e.store(struct, 0, e.const(_size_t, _ERR_SIZE), _size_t)
        e.store(struct, _ERR_MESSAGE, e.arg(args[1], sig.args[1]), _u)
        e.store(struct, _ERR_CODE, e.arg(args[2], sig.args[2], _i32), _i32)
        return e.call_api(e.arg(args[0], sig.args[0]), _API_ERROR_CREATE, struct)

    return _u(api, message, code), codegen


#: The longest message :func:`error_create_prefixed` makes, NUL included (its
#: text is built on the stack); the end of a longer one is cut.
PREFIXED_BYTES = 4096


@_njit_native
def error_create_prefixed(api, prefix, message, code):
    """As :func:`error_create`, with the message ``"<prefix>: <message>"``
    (both NUL-terminated C strings given by address; at most
    ``PREFIXED_BYTES - 1`` bytes of it): for a handler that learns the
    kernel's name at run time."""
    # On the stack, not in a NumPy array: no allocator to compile (a quarter
    # of a second of a process's first handler).
    text = stack_buffer(PREFIXED_BYTES)  # zeroed: what is written stays terminated
    last = PREFIXED_BYTES - 1
    n = 0
    i = 0
    while n < last and load(prefix + i, types.uint8) != 0:
        store(text + n, load(prefix + i, types.uint8), types.uint8)
        n += 1
        i += 1
    if n < last:
        store(text + n, 58, types.uint8)  # ":"
        n += 1
    if n < last:
        store(text + n, 32, types.uint8)  # " "
        n += 1
    i = 0
    while n < last and load(message + i, types.uint8) != 0:
        store(text + n, load(message + i, types.uint8), types.uint8)
        n += 1
        i += 1
    # XLA copies the message before this returns.
    return error_create(api, text, code)


@_helper
def error_destroy(typingctx, api, error):
    """Free an ``XLA_FFI_Error*`` that will not be returned to XLA."""
    _integers("error_destroy(api, error)", api, error)

    def codegen(context, builder, sig, args):
        e = _Emit(context, builder)
        struct = e.stack(_DESTROY_BYTES)
        e.store(struct, 0, e.const(_size_t, _DESTROY_SIZE), _size_t)
        e.store(struct, _DESTROY_ERROR, e.arg(args[1], sig.args[1]), _u)
        e.call_api(e.arg(args[0], sig.args[0]), _API_ERROR_DESTROY, struct)
        return context.get_dummy_value()

    return types.void(api, error), codegen


@_njit
def first_error(api, errors):
    """The first non-null error of ``errors`` (0 when there is none); the
    others are destroyed, so one failing batch of many leaks nothing."""
    first = _u(0)
    for i in range(errors.shape[0]):
        if errors[i] != 0:
            if first == 0:
                first = errors[i]
            else:
                error_destroy(api, errors[i])
    return first


def _context_getter(
    name: str, size: int, nbytes: int, ctx_at: int, entry: int, out_at: int, ty, doc: str
):
    # ``(error, value)``: one value of the call's execution context, asked of the API.
    def typer(typingctx, frame):
        _integers(f"{name}(frame)", frame)
        result = types.Tuple((_u, ty))

        def codegen(context, builder, sig, args):
            e = _Emit(context, builder)
            struct = e.ask_context(e.arg(args[0], sig.args[0]), size, nbytes, ctx_at, entry)
            values = [e.error, e.load(struct, out_at, ty)]
            return context.make_tuple(builder, result, values)

        return result(frame), codegen

    typer.__name__ = typer.__qualname__ = name
    typer.__doc__ = doc
    return _helper(typer)


stream_get = _context_getter(
    "stream_get",
    _STREAM_SIZE,
    _STREAM_BYTES,
    _STREAM_CTX,
    _API_STREAM_GET,
    _STREAM_OUT,
    _u,
    "``(error, stream)``: the platform stream of the call (error is 0 on success).",
)
device_ordinal_get = _context_getter(
    "device_ordinal_get",
    _ORD_SIZE,
    _ORD_BYTES,
    _ORD_CTX,
    _API_ORDINAL_GET,
    _ORD_OUT,
    _i32,
    "``(error, ordinal)``: the device ordinal of the call (error is 0 on success).",
)
