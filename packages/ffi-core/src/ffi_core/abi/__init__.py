"""The XLA FFI C API as Python sees it (semi-public, for bridge authors and for
handlers written by hand).

The lowest layer of ffi-core, importing nothing else of it: ``capi``, the C
structs and enums of ``xla/ffi/api/c_api.h`` mirrored once in ctypes; the
call frame read from Python (``CallFrame``, ``BufferView``, FFI errors);
dtype codes; the FFI API version of the installed jaxlib; ``python_handler``,
a Python function as an FFI handler. ``ffi_core.abi.native`` (extra
``native``, needs numba) holds the same call-frame operations compiled, for
handlers that run without Python.

Changed only in minor releases, each change listed in the CHANGELOG.
"""

from . import _capi as capi
from ._api_version import api_version as api_version
from ._api_version import c_api_header as c_api_header
from ._capi import AttrType as AttrType
from ._capi import DataType as DataType
from ._capi import ErrorCode as ErrorCode
from ._capi import ExecutionStage as ExecutionStage
from ._capi import HandlerTraits as HandlerTraits
from ._dtypes import SUPPORTED_DTYPES as SUPPORTED_DTYPES
from ._dtypes import UnsupportedDTypeError as UnsupportedDTypeError
from ._dtypes import code_from_dtype as code_from_dtype
from ._dtypes import dtype_from_code as dtype_from_code
from ._frame import BufferView as BufferView
from ._frame import CallFrame as CallFrame
from ._frame import FFIError as FFIError
from ._frame import create_error as create_error
from ._frame import destroy_error as destroy_error
from ._frame import error_message as error_message
from ._python_handler import python_handler as python_handler

__all__ = [
    "SUPPORTED_DTYPES",
    "AttrType",
    "BufferView",
    "CallFrame",
    "DataType",
    "ErrorCode",
    "ExecutionStage",
    "FFIError",
    "HandlerTraits",
    "UnsupportedDTypeError",
    "api_version",
    "c_api_header",
    "capi",
    "code_from_dtype",
    "create_error",
    "destroy_error",
    "dtype_from_code",
    "error_message",
    "python_handler",
]
