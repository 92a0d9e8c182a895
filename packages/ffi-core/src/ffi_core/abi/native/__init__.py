"""ffi_core.abi.native: call-frame operations compiled with Numba.

For handlers that run without Python: read buffers and dims, answer the
metadata handshake, create errors, get the stream and device ordinal, and call
a kernel so that an exception it raises becomes an ``XLA_FFI_Error*``, call a
C function at an address read at run time (``call_c``); and keep compiled
handlers in a checked disk cache (``cached_cfunc``, ``cached_njit``,
``cache_dispatcher`` over ``Layers``; ``handler_module`` runs their source;
prebuilt directories may hold code for a portable CPU model, ``PORTABLE_CPUS``,
loaded where ``portable_cpus()`` names it). Needs the ``native`` extra
(``pip install "ffi-core[native]"``).
"""

from ..._install import missing as _missing

try:
    import numba as _numba  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise _missing("numba", needed_by=__name__, requirement="ffi-core[native]") from exc

from ._disk_cache import PORTABLE_CPUS as PORTABLE_CPUS
from ._disk_cache import HandlerCacheWarning as HandlerCacheWarning
from ._disk_cache import Layers as Layers
from ._disk_cache import cache_dispatcher as cache_dispatcher
from ._disk_cache import cached_cfunc as cached_cfunc
from ._disk_cache import cached_njit as cached_njit
from ._disk_cache import handler_module as handler_module
from ._disk_cache import handler_name as handler_name
from ._disk_cache import portable_cpus as portable_cpus
from ._frame import answer_metadata as answer_metadata
from ._frame import arg_buffer as arg_buffer
from ._frame import attr_array_data as attr_array_data
from ._frame import attr_array_size as attr_array_size
from ._frame import attr_name_size as attr_name_size
from ._frame import attr_scalar_dtype as attr_scalar_dtype
from ._frame import attr_scalar_value as attr_scalar_value
from ._frame import attr_type as attr_type
from ._frame import buffer_data as buffer_data
from ._frame import buffer_dim as buffer_dim
from ._frame import buffer_dtype as buffer_dtype
from ._frame import buffer_rank as buffer_rank
from ._frame import device_ordinal_get as device_ordinal_get
from ._frame import error_create as error_create
from ._frame import error_create_prefixed as error_create_prefixed
from ._frame import error_destroy as error_destroy
from ._frame import first_error as first_error
from ._frame import frame_api as frame_api
from ._frame import frame_ctx as frame_ctx
from ._frame import frame_stage as frame_stage
from ._frame import is_metadata_query as is_metadata_query
from ._frame import num_args as num_args
from ._frame import num_attrs as num_attrs
from ._frame import num_rets as num_rets
from ._frame import ret_buffer as ret_buffer
from ._frame import stream_get as stream_get
from ._guarded import call_guarded as call_guarded
from ._guarded import call_guarded_at as call_guarded_at
from ._guarded import compiled_address as compiled_address
from ._guarded import error_from_exception as error_from_exception
from ._intrinsics import array_view as array_view
from ._intrinsics import call_api_fn as call_api_fn
from ._intrinsics import call_c as call_c
from ._intrinsics import call_void_fn as call_void_fn
from ._intrinsics import cstring as cstring
from ._intrinsics import load as load
from ._intrinsics import load_at as load_at
from ._intrinsics import stack_buffer as stack_buffer
from ._intrinsics import store as store
from ._intrinsics import store_at as store_at
from ._intrinsics import voidptr as voidptr

__all__ = [
    "PORTABLE_CPUS",
    "HandlerCacheWarning",
    "Layers",
    "answer_metadata",
    "arg_buffer",
    "array_view",
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
    "cache_dispatcher",
    "cached_cfunc",
    "cached_njit",
    "call_api_fn",
    "call_c",
    "call_guarded",
    "call_guarded_at",
    "call_void_fn",
    "compiled_address",
    "cstring",
    "device_ordinal_get",
    "error_create",
    "error_create_prefixed",
    "error_destroy",
    "error_from_exception",
    "first_error",
    "frame_api",
    "frame_ctx",
    "frame_stage",
    "handler_module",
    "handler_name",
    "is_metadata_query",
    "load",
    "load_at",
    "num_args",
    "num_attrs",
    "num_rets",
    "portable_cpus",
    "ret_buffer",
    "stack_buffer",
    "store",
    "store_at",
    "stream_get",
    "voidptr",
]
