"""Call-frame operations compiled with Numba, for handlers that run no Python.

Every offset comes from the ctypes structures in :mod:`ffi_core._capi`, the
one description of the ABI. The functions are ``@njit(inline="always")`` so a
handler that calls them reads the frame with a handful of loads.
"""

from __future__ import annotations

import ctypes

import numba
from numba import types

from .. import _capi as C
from .._api_version import api_version
from ._intrinsics import call_api_fn, load, stack_buffer, store

__all__ = [
    "answer_metadata",
    "arg_buffer",
    "attr_array_data",
    "attr_array_size",
    "attr_name_size",
    "attr_scalar_dtype",
    "attr_scalar_value",
    "attr_type",
    "buffer_data",
    "buffer_dim",
    "buffer_dtype",
    "buffer_rank",
    "device_ordinal_get",
    "error_create",
    "error_destroy",
    "first_error",
    "frame_api",
    "frame_ctx",
    "frame_stage",
    "is_metadata_query",
    "num_args",
    "num_attrs",
    "num_rets",
    "ret_buffer",
    "stream_get",
]

_PTR = ctypes.sizeof(ctypes.c_void_p)
_u = types.uintp
_i32 = types.int32
_i64 = types.int64
_u32 = types.uint32
_size_t = types.uintp

# Offsets, named after the C fields they address.
_FRAME_EXT = C.offset_of(C.XLA_FFI_CallFrame, "extension_start")
_FRAME_API = C.offset_of(C.XLA_FFI_CallFrame, "api")
_FRAME_CTX = C.offset_of(C.XLA_FFI_CallFrame, "ctx")
_FRAME_STAGE = C.offset_of(C.XLA_FFI_CallFrame, "stage")
_FRAME_ARGS_SIZE = C.offset_of(C.XLA_FFI_CallFrame, "args.size")
_FRAME_ARGS = C.offset_of(C.XLA_FFI_CallFrame, "args.args")
_FRAME_RETS_SIZE = C.offset_of(C.XLA_FFI_CallFrame, "rets.size")
_FRAME_RETS = C.offset_of(C.XLA_FFI_CallFrame, "rets.rets")
_FRAME_ATTRS_SIZE = C.offset_of(C.XLA_FFI_CallFrame, "attrs.size")
_FRAME_ATTRS_TYPES = C.offset_of(C.XLA_FFI_CallFrame, "attrs.types")
_FRAME_ATTRS_NAMES = C.offset_of(C.XLA_FFI_CallFrame, "attrs.names")
_FRAME_ATTRS = C.offset_of(C.XLA_FFI_CallFrame, "attrs.attrs")
_SPAN_LEN = C.offset_of(C.XLA_FFI_ByteSpan, "len")
_SCALAR_DTYPE = C.offset_of(C.XLA_FFI_Scalar, "dtype")
_SCALAR_VALUE = C.offset_of(C.XLA_FFI_Scalar, "value")
_ARRAY_SIZE = C.offset_of(C.XLA_FFI_Array, "size")
_ARRAY_DATA = C.offset_of(C.XLA_FFI_Array, "data")
_ENUM = ctypes.sizeof(ctypes.c_int)
_EXT_TYPE = C.offset_of(C.XLA_FFI_Extension_Base, "type")
_EXT_METADATA = C.offset_of(C.XLA_FFI_Metadata_Extension, "metadata")
_META_SIZE = C.offset_of(C.XLA_FFI_Metadata, "struct_size")
_META_VERSION = C.offset_of(C.XLA_FFI_Metadata, "api_version")
_META_TRAITS = C.offset_of(C.XLA_FFI_Metadata, "traits")
_META_STATE = C.offset_of(C.XLA_FFI_Metadata, "state_type_id")
_META_FULL_SIZE = C.struct_size(C.XLA_FFI_Metadata)
_VER_SIZE = C.offset_of(C.XLA_FFI_Api_Version, "struct_size")
_VER_EXT = C.offset_of(C.XLA_FFI_Api_Version, "extension_start")
_VER_MAJOR = C.offset_of(C.XLA_FFI_Api_Version, "major_version")
_VER_MINOR = C.offset_of(C.XLA_FFI_Api_Version, "minor_version")
_VER_STRUCT_SIZE = C.struct_size(C.XLA_FFI_Api_Version, "minor_version")
_BUF_DTYPE = C.offset_of(C.XLA_FFI_Buffer, "dtype")
_BUF_DATA = C.offset_of(C.XLA_FFI_Buffer, "data")
_BUF_RANK = C.offset_of(C.XLA_FFI_Buffer, "rank")
_BUF_DIMS = C.offset_of(C.XLA_FFI_Buffer, "dims")
_API_ERROR_CREATE = C.offset_of(C.XLA_FFI_Api, "XLA_FFI_Error_Create")
_API_ERROR_DESTROY = C.offset_of(C.XLA_FFI_Api, "XLA_FFI_Error_Destroy")
_DESTROY_SIZE = C.struct_size(C.XLA_FFI_Error_Destroy_Args, "error")
_DESTROY_BYTES = ctypes.sizeof(C.XLA_FFI_Error_Destroy_Args)
_DESTROY_ERROR = C.offset_of(C.XLA_FFI_Error_Destroy_Args, "error")
_API_STREAM_GET = C.offset_of(C.XLA_FFI_Api, "XLA_FFI_Stream_Get")
_API_ORDINAL_GET = C.offset_of(C.XLA_FFI_Api, "XLA_FFI_DeviceOrdinal_Get")
_ERR_SIZE = C.struct_size(C.XLA_FFI_Error_Create_Args, "errc")
_ERR_BYTES = ctypes.sizeof(C.XLA_FFI_Error_Create_Args)
_ERR_MESSAGE = C.offset_of(C.XLA_FFI_Error_Create_Args, "message")
_ERR_CODE = C.offset_of(C.XLA_FFI_Error_Create_Args, "errc")
_STREAM_SIZE = C.struct_size(C.XLA_FFI_Stream_Get_Args, "stream")
_STREAM_BYTES = ctypes.sizeof(C.XLA_FFI_Stream_Get_Args)
_STREAM_CTX = C.offset_of(C.XLA_FFI_Stream_Get_Args, "ctx")
_STREAM_OUT = C.offset_of(C.XLA_FFI_Stream_Get_Args, "stream")
_ORD_SIZE = C.struct_size(C.XLA_FFI_DeviceOrdinal_Get_Args, "device_ordinal")
_ORD_BYTES = ctypes.sizeof(C.XLA_FFI_DeviceOrdinal_Get_Args)
_ORD_CTX = C.offset_of(C.XLA_FFI_DeviceOrdinal_Get_Args, "ctx")
_ORD_OUT = C.offset_of(C.XLA_FFI_DeviceOrdinal_Get_Args, "device_ordinal")
_METADATA = int(C.ExtensionType.METADATA)
_MAJOR, _MINOR = api_version()

_inline = numba.njit(inline="always", cache=False)
_njit = numba.njit(cache=False)


@_inline
def frame_api(frame):
    """The ``XLA_FFI_Api*`` of a call frame."""
    return load(frame + _FRAME_API, _u)


@_inline
def frame_ctx(frame):
    """The ``XLA_FFI_ExecutionContext*`` of a call frame."""
    return load(frame + _FRAME_CTX, _u)


@_inline
def frame_stage(frame):
    """The ``XLA_FFI_ExecutionStage`` of a call frame."""
    return load(frame + _FRAME_STAGE, _i32)


@_inline
def is_metadata_query(frame):
    """True when XLA is asking the handler for its metadata, not running it."""
    ext = load(frame + _FRAME_EXT, _u)
    return ext != 0 and load(ext + _EXT_TYPE, _i32) == _METADATA


@_inline
def answer_metadata(frame, traits):
    """Fill the metadata extension: API version of the installed jaxlib,
    ``traits`` and no state type. Returns a null error (0)."""
    ext = load(frame + _FRAME_EXT, _u)
    meta = load(ext + _EXT_METADATA, _u)
    version = meta + _META_VERSION
    store(version + _VER_SIZE, _VER_STRUCT_SIZE, _size_t)
    store(version + _VER_EXT, 0, _u)
    store(version + _VER_MAJOR, _MAJOR, _i32)
    store(version + _VER_MINOR, _MINOR, _i32)
    store(meta + _META_TRAITS, traits, _u32)
    # Older frameworks allocate the struct without the trailing state_type_id.
    if load(meta + _META_SIZE, _size_t) >= _META_FULL_SIZE:
        store(meta + _META_STATE, 0, _i64)
    return _u(0)


@_inline
def num_args(frame):
    return load(frame + _FRAME_ARGS_SIZE, _i64)


@_inline
def num_rets(frame):
    return load(frame + _FRAME_RETS_SIZE, _i64)


@_inline
def arg_buffer(frame, i):
    """The ``XLA_FFI_Buffer*`` of argument ``i``."""
    return load(load(frame + _FRAME_ARGS, _u) + i * _PTR, _u)


@_inline
def ret_buffer(frame, i):
    """The ``XLA_FFI_Buffer*`` of result ``i``."""
    return load(load(frame + _FRAME_RETS, _u) + i * _PTR, _u)


@_inline
def num_attrs(frame):
    """How many attributes the call carries (XLA passes them sorted by name)."""
    return load(frame + _FRAME_ATTRS_SIZE, _i64)


@_inline
def attr_type(frame, i):
    """The ``XLA_FFI_AttrType`` of attribute ``i`` (3 for a scalar)."""
    return load(load(frame + _FRAME_ATTRS_TYPES, _u) + i * _ENUM, _i32)


@_inline
def attr_name_size(frame, i):
    """The length in bytes of attribute ``i``'s name."""
    span = load(load(frame + _FRAME_ATTRS_NAMES, _u) + i * _PTR, _u)
    return load(span + _SPAN_LEN, _size_t)


@_inline
def attr_scalar_dtype(frame, i):
    """The ``XLA_FFI_DataType`` of scalar (or array) attribute ``i``."""
    return load(load(load(frame + _FRAME_ATTRS, _u) + i * _PTR, _u) + _SCALAR_DTYPE, _i32)


@_inline
def attr_scalar_value(frame, i):
    """The address of scalar attribute ``i``'s value."""
    return load(load(load(frame + _FRAME_ATTRS, _u) + i * _PTR, _u) + _SCALAR_VALUE, _u)


@_inline
def attr_array_size(frame, i):
    """The element count of array attribute ``i`` (its dtype is read like a
    scalar's, with ``attr_scalar_dtype``)."""
    return load(load(load(frame + _FRAME_ATTRS, _u) + i * _PTR, _u) + _ARRAY_SIZE, _size_t)


@_inline
def attr_array_data(frame, i):
    """The address of array attribute ``i``'s first element."""
    return load(load(load(frame + _FRAME_ATTRS, _u) + i * _PTR, _u) + _ARRAY_DATA, _u)


@_inline
def buffer_dtype(buf):
    return load(buf + _BUF_DTYPE, _i32)


@_inline
def buffer_data(buf):
    return load(buf + _BUF_DATA, _u)


@_inline
def buffer_rank(buf):
    return load(buf + _BUF_RANK, _i64)


@_inline
def buffer_dim(buf, i):
    return load(load(buf + _BUF_DIMS, _u) + i * 8, _i64)


@_inline
def error_create(api, message, code):
    """An ``XLA_FFI_Error*`` with the NUL-terminated ``message`` (an address,
    e.g. from ``cstring``) and error ``code``; XLA copies the message."""
    args = stack_buffer(_ERR_BYTES)
    store(args, _ERR_SIZE, _size_t)
    store(args + _ERR_MESSAGE, message, _u)
    store(args + _ERR_CODE, code, _i32)
    return call_api_fn(load(api + _API_ERROR_CREATE, _u), args)


@_inline
def error_destroy(api, error):
    """Free an ``XLA_FFI_Error*`` that will not be returned to XLA."""
    args = stack_buffer(_DESTROY_BYTES)
    store(args, _DESTROY_SIZE, _size_t)
    store(args + _DESTROY_ERROR, error, _u)
    call_api_fn(load(api + _API_ERROR_DESTROY, _u), args)


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


@_inline
def stream_get(frame):
    """``(error, stream)``: the platform stream of the call (error is 0 on success)."""
    args = stack_buffer(_STREAM_BYTES)
    store(args, _STREAM_SIZE, _size_t)
    store(args + _STREAM_CTX, frame_ctx(frame), _u)
    error = call_api_fn(load(frame_api(frame) + _API_STREAM_GET, _u), args)
    return error, load(args + _STREAM_OUT, _u)


@_inline
def device_ordinal_get(frame):
    """``(error, ordinal)``: the device ordinal of the call (error is 0 on success)."""
    args = stack_buffer(_ORD_BYTES)
    store(args, _ORD_SIZE, _size_t)
    store(args + _ORD_CTX, frame_ctx(frame), _u)
    error = call_api_fn(load(frame_api(frame) + _API_ORDINAL_GET, _u), args)
    return error, load(args + _ORD_OUT, _i32)
