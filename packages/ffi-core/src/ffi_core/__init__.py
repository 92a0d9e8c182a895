"""ffi-core: the XLA FFI C API mirrored once, handler helpers and a target registry."""

from . import _capi as capi
from ._api_version import api_version as api_version
from ._api_version import c_api_header as c_api_header
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
from ._registry import PLATFORMS as PLATFORMS
from ._registry import TargetConflictError as TargetConflictError
from ._registry import handler_address as handler_address
from ._registry import register_target as register_target
from ._registry import registered_targets as registered_targets
from ._registry import target_name as target_name
from ._version import __version__ as __version__

__all__ = [
    "PLATFORMS",
    "SUPPORTED_DTYPES",
    "BufferView",
    "CallFrame",
    "DataType",
    "ErrorCode",
    "ExecutionStage",
    "FFIError",
    "HandlerTraits",
    "TargetConflictError",
    "UnsupportedDTypeError",
    "__version__",
    "api_version",
    "c_api_header",
    "capi",
    "code_from_dtype",
    "create_error",
    "destroy_error",
    "dtype_from_code",
    "error_message",
    "handler_address",
    "python_handler",
    "register_target",
    "registered_targets",
    "target_name",
]
