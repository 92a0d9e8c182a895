"""The XLA FFI C API (``xla/ffi/api/c_api.h``) mirrored once in ctypes.

These structures are the single description of the ABI in this project: the
native helpers in :mod:`ffi_core.abi.native` take their field offsets from here, and
a test compiles ``offsetof``/``sizeof`` lines against the header that ships in
the installed jaxlib and compares them with these classes.
"""

from __future__ import annotations

import ctypes
import enum
from typing import Any

__all__ = [
    "AttrType",
    "DataType",
    "ErrorCode",
    "ExecutionStage",
    "ExtensionType",
    "HandlerTraits",
    "XLA_FFI_Api",
    "XLA_FFI_Api_Version",
    "XLA_FFI_Args",
    "XLA_FFI_Array",
    "XLA_FFI_Attrs",
    "XLA_FFI_Buffer",
    "XLA_FFI_ByteSpan",
    "XLA_FFI_CallFrame",
    "XLA_FFI_DeviceOrdinal_Get_Args",
    "XLA_FFI_Error_Create_Args",
    "XLA_FFI_Error_Destroy_Args",
    "XLA_FFI_Error_GetMessage_Args",
    "XLA_FFI_Extension_Base",
    "XLA_FFI_Metadata",
    "XLA_FFI_Metadata_Extension",
    "XLA_FFI_Rets",
    "XLA_FFI_Scalar",
    "XLA_FFI_Stream_Get_Args",
    "XLA_FFI_TypeId",
    "offset_of",
    "struct_size",
]

_c_enum = ctypes.c_int  # C enums in c_api.h are int-sized on every supported ABI.
_fn_ptr = ctypes.c_void_p  # API table entries are read as raw addresses.


class ExtensionType(enum.IntEnum):
    METADATA = 1


class ErrorCode(enum.IntEnum):
    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class AttrType(enum.IntEnum):
    ARRAY = 1
    DICTIONARY = 2
    SCALAR = 3
    STRING = 4


class DataType(enum.IntEnum):
    INVALID = 0
    PRED = 1
    S1 = 30
    S2 = 26
    S4 = 21
    S8 = 2
    S16 = 3
    S32 = 4
    S64 = 5
    U1 = 31
    U2 = 27
    U4 = 22
    U8 = 6
    U16 = 7
    U32 = 8
    U64 = 9
    F16 = 10
    F32 = 11
    F64 = 12
    BF16 = 16
    C64 = 15
    C128 = 18
    TOKEN = 17
    F8E5M2 = 19
    F8E3M4 = 29
    F8E4M3 = 28
    F8E4M3FN = 20
    F8E4M3B11FNUZ = 23
    F8E5M2FNUZ = 24
    F8E4M3FNUZ = 25
    F4E2M1FN = 32
    F8E8M0FNU = 33


class ExecutionStage(enum.IntEnum):
    INSTANTIATE = 0
    PREPARE = 1
    INITIALIZE = 2
    EXECUTE = 3


class HandlerTraits(enum.IntFlag):
    NONE = 0
    COMMAND_BUFFER_COMPATIBLE = 1


class XLA_FFI_Extension_Base(ctypes.Structure):
    pass


XLA_FFI_Extension_Base._fields_ = [
    ("struct_size", ctypes.c_size_t),
    ("type", _c_enum),
    ("next", ctypes.POINTER(XLA_FFI_Extension_Base)),
]

_ext = ctypes.POINTER(XLA_FFI_Extension_Base)


class XLA_FFI_Api_Version(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", _ext),
        ("major_version", ctypes.c_int),
        ("minor_version", ctypes.c_int),
    ]


class XLA_FFI_Error_Create_Args(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", _ext),
        ("message", ctypes.c_char_p),
        ("errc", _c_enum),
    ]


class XLA_FFI_Error_GetMessage_Args(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", _ext),
        ("error", ctypes.c_void_p),
        ("message", ctypes.c_char_p),
    ]


class XLA_FFI_Error_Destroy_Args(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", _ext),
        ("error", ctypes.c_void_p),
    ]


class XLA_FFI_Buffer(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", _ext),
        ("dtype", _c_enum),
        ("data", ctypes.c_void_p),
        ("rank", ctypes.c_int64),
        ("dims", ctypes.POINTER(ctypes.c_int64)),
    ]


class XLA_FFI_ByteSpan(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class XLA_FFI_Scalar(ctypes.Structure):
    _fields_ = [("dtype", _c_enum), ("value", ctypes.c_void_p)]


class XLA_FFI_Array(ctypes.Structure):
    _fields_ = [("dtype", _c_enum), ("size", ctypes.c_size_t), ("data", ctypes.c_void_p)]


class XLA_FFI_TypeId(ctypes.Structure):
    _fields_ = [("type_id", ctypes.c_int64)]


class XLA_FFI_Args(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", _ext),
        ("size", ctypes.c_int64),
        ("types", ctypes.POINTER(_c_enum)),
        ("args", ctypes.POINTER(ctypes.c_void_p)),
    ]


class XLA_FFI_Rets(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", _ext),
        ("size", ctypes.c_int64),
        ("types", ctypes.POINTER(_c_enum)),
        ("rets", ctypes.POINTER(ctypes.c_void_p)),
    ]


class XLA_FFI_Attrs(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", _ext),
        ("size", ctypes.c_int64),
        ("types", ctypes.POINTER(_c_enum)),
        ("names", ctypes.POINTER(ctypes.POINTER(XLA_FFI_ByteSpan))),
        ("attrs", ctypes.POINTER(ctypes.c_void_p)),
    ]


class XLA_FFI_CallFrame(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", _ext),
        ("api", ctypes.c_void_p),
        ("ctx", ctypes.c_void_p),
        ("stage", _c_enum),
        ("args", XLA_FFI_Args),
        ("rets", XLA_FFI_Rets),
        ("attrs", XLA_FFI_Attrs),
        ("future", ctypes.c_void_p),
    ]


class XLA_FFI_Stream_Get_Args(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", _ext),
        ("ctx", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
    ]


class XLA_FFI_DeviceOrdinal_Get_Args(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", _ext),
        ("ctx", ctypes.c_void_p),
        ("device_ordinal", ctypes.c_int32),
    ]


class XLA_FFI_Metadata(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("api_version", XLA_FFI_Api_Version),
        ("traits", ctypes.c_uint32),
        ("state_type_id", XLA_FFI_TypeId),
    ]


class XLA_FFI_Metadata_Extension(ctypes.Structure):
    _fields_ = [
        ("extension_base", XLA_FFI_Extension_Base),
        ("metadata", ctypes.POINTER(XLA_FFI_Metadata)),
    ]


class XLA_FFI_Api(ctypes.Structure):
    # Entries after ``internal_api`` are function pointers, in header order,
    # up to the device-ordinal getter (the newest entry this project uses).
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("extension_start", _ext),
        ("api_version", XLA_FFI_Api_Version),
        ("internal_api", ctypes.c_void_p),
        ("XLA_FFI_Error_Create", _fn_ptr),
        ("XLA_FFI_Error_GetMessage", _fn_ptr),
        ("XLA_FFI_Error_Destroy", _fn_ptr),
        ("XLA_FFI_Handler_Register", _fn_ptr),
        ("XLA_FFI_Stream_Get", _fn_ptr),
        ("XLA_FFI_Type_Register", _fn_ptr),
        ("XLA_FFI_ExecutionContext_Get", _fn_ptr),
        ("XLA_FFI_State_Set", _fn_ptr),
        ("XLA_FFI_State_Get", _fn_ptr),
        ("XLA_FFI_DeviceMemory_Allocate", _fn_ptr),
        ("XLA_FFI_DeviceMemory_Free", _fn_ptr),
        ("XLA_FFI_ThreadPool_Schedule", _fn_ptr),
        ("XLA_FFI_ThreadPool_NumThreads", _fn_ptr),
        ("XLA_FFI_Future_Create", _fn_ptr),
        ("XLA_FFI_Future_SetAvailable", _fn_ptr),
        ("XLA_FFI_Future_SetError", _fn_ptr),
        ("XLA_FFI_RunId_Get", _fn_ptr),
        ("XLA_FFI_DeviceOrdinal_Get", _fn_ptr),
    ]


def offset_of(struct: type[ctypes.Structure], path: str) -> int:
    """Byte offset of a (possibly nested, dot-separated) field in ``struct``.

    Example:
        >>> offset_of(XLA_FFI_CallFrame, "args.args")
        72
    """
    offset = 0
    # A Structure subclass: each declares its own _fields_, which `type` does not have.
    current: Any = struct
    for name in path.split("."):
        field = getattr(current, name)
        offset += field.offset
        current = dict(current._fields_)[name]
    return offset


def struct_size(struct: type[ctypes.Structure], last_field: str | None = None) -> int:
    """``XLA_FFI_STRUCT_SIZE(struct, last_field)``: the size up to and including
    ``last_field`` (or ``sizeof`` when ``last_field`` is None)."""
    if last_field is None:
        return ctypes.sizeof(struct)
    field = getattr(struct, last_field)
    return field.offset + field.size
