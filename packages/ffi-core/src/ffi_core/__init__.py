"""ffi-core: the XLA FFI C API mirrored once, handler helpers, a target registry, and the
call signatures, argument checks and vmap pieces that the kernel bridges share."""

from . import _capi as capi
from ._api_version import api_version as api_version
from ._api_version import c_api_header as c_api_header
from ._autodiff import raise_on_differentiation as raise_on_differentiation
from ._batching import batch_call as batch_call
from ._batching import batch_to_front as batch_to_front
from ._batching import expand_batch as expand_batch
from ._batching import leading_batch as leading_batch
from ._batching import scan_batch as scan_batch
from ._cache_dir import CacheDirWarning as CacheDirWarning
from ._cache_dir import cache_root as cache_root
from ._cache_dir import checked_cache_dir as checked_cache_dir
from ._capi import DataType as DataType
from ._capi import ErrorCode as ErrorCode
from ._capi import ExecutionStage as ExecutionStage
from ._capi import HandlerTraits as HandlerTraits
from ._checks import check_aliases as check_aliases
from ._checks import check_arity as check_arity
from ._checks import check_inputs as check_inputs
from ._checks import positional_count as positional_count
from ._cost_hint import HINT_MIN_ELEMENTS as HINT_MIN_ELEMENTS
from ._cost_hint import hint_source as hint_source
from ._cost_hint import lower_with_hint as lower_with_hint
from ._deserialize import UnsignedBlobWarning as UnsignedBlobWarning
from ._deserialize import deserialize as deserialize
from ._digest import address_bound_values as address_bound_values
from ._digest import function_digest as function_digest
from ._dtypes import SUPPORTED_DTYPES as SUPPORTED_DTYPES
from ._dtypes import UnsupportedDTypeError as UnsupportedDTypeError
from ._dtypes import code_from_dtype as code_from_dtype
from ._dtypes import dtype_from_code as dtype_from_code
from ._errors import KernelCompileError as KernelCompileError
from ._export import ExportError as ExportError
from ._export import KernelCatalog as KernelCatalog
from ._export import MissingKernelError as MissingKernelError
from ._export import Unexportable as Unexportable
from ._export import custom_call_targets as custom_call_targets
from ._export import export as export
from ._export import recipe_context as recipe_context
from ._export import record_recipe as record_recipe
from ._export import register_kernel_acceptor as register_kernel_acceptor
from ._export import register_rebuilder as register_rebuilder
from ._export import serialize as serialize
from ._frame import BufferView as BufferView
from ._frame import CallFrame as CallFrame
from ._frame import FFIError as FFIError
from ._frame import create_error as create_error
from ._frame import destroy_error as destroy_error
from ._frame import error_message as error_message
from ._jax_compat import def_eager_impl as def_eager_impl
from ._jax_compat import require_devices_at_lowering as require_devices_at_lowering
from ._outs import is_output_spec as is_output_spec
from ._outs import normalize_outs as normalize_outs
from ._outs import output_avals as output_avals
from ._python_handler import python_handler as python_handler
from ._rebuilders import REBUILDER_ENTRY_POINTS as REBUILDER_ENTRY_POINTS
from ._recipe import CALL_SIG_FIELDS as CALL_SIG_FIELDS
from ._recipe import StepField as StepField
from ._registry import PLATFORMS as PLATFORMS
from ._registry import XLA_PLATFORM_NAMES as XLA_PLATFORM_NAMES
from ._registry import TargetConflictError as TargetConflictError
from ._registry import handler_address as handler_address
from ._registry import register_target as register_target
from ._registry import registered_targets as registered_targets
from ._registry import target_name as target_name
from ._spec import VMAP_METHODS as VMAP_METHODS
from ._spec import ArraySig as ArraySig
from ._spec import CallSig as CallSig
from ._spec import KernelDTypes as KernelDTypes
from ._spec import array_sig as array_sig
from ._spec import check_dtype as check_dtype
from ._spec import check_vmap_method as check_vmap_method
from ._version import __version__ as __version__
from .sharding._partition import BoundPrimitive as BoundPrimitive
from .sharding._partition import ShapedCall as ShapedCall
from .sharding._partition import partitioned_call as partitioned_call
from .sharding._partition import shaped_values as shaped_values
from .sharding._rule import ShardingRule as ShardingRule
from .sharding._rule import check_sharding_rule as check_sharding_rule
from .sharding._rule import resolve_sharding_rule as resolve_sharding_rule

__all__ = [
    "CALL_SIG_FIELDS",
    "HINT_MIN_ELEMENTS",
    "PLATFORMS",
    "REBUILDER_ENTRY_POINTS",
    "SUPPORTED_DTYPES",
    "VMAP_METHODS",
    "XLA_PLATFORM_NAMES",
    "ArraySig",
    "BoundPrimitive",
    "BufferView",
    "CacheDirWarning",
    "CallFrame",
    "CallSig",
    "DataType",
    "ErrorCode",
    "ExecutionStage",
    "ExportError",
    "FFIError",
    "HandlerTraits",
    "KernelCatalog",
    "KernelCompileError",
    "KernelDTypes",
    "MissingKernelError",
    "ShapedCall",
    "ShardingRule",
    "StepField",
    "TargetConflictError",
    "Unexportable",
    "UnsignedBlobWarning",
    "UnsupportedDTypeError",
    "__version__",
    "address_bound_values",
    "api_version",
    "array_sig",
    "batch_call",
    "batch_to_front",
    "c_api_header",
    "cache_root",
    "capi",
    "check_aliases",
    "check_arity",
    "check_dtype",
    "check_inputs",
    "check_sharding_rule",
    "check_vmap_method",
    "checked_cache_dir",
    "code_from_dtype",
    "create_error",
    "custom_call_targets",
    "def_eager_impl",
    "deserialize",
    "destroy_error",
    "dtype_from_code",
    "error_message",
    "expand_batch",
    "export",
    "function_digest",
    "handler_address",
    "hint_source",
    "is_output_spec",
    "leading_batch",
    "lower_with_hint",
    "normalize_outs",
    "output_avals",
    "partitioned_call",
    "positional_count",
    "python_handler",
    "raise_on_differentiation",
    "recipe_context",
    "record_recipe",
    "register_kernel_acceptor",
    "register_rebuilder",
    "register_target",
    "registered_targets",
    "require_devices_at_lowering",
    "resolve_sharding_rule",
    "scan_batch",
    "serialize",
    "shaped_values",
    "target_name",
]
