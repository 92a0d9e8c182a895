"""ffi-core: custom kernels as JAX operations through XLA's typed FFI.

What a user of an operation needs is here: ``export``/``serialize``/
``deserialize`` (``jax.export`` round trips for functions that call kernels),
``ShardingRule``, the error types every bridge raises, and the cache-directory
settings. The layers below it are folders: ``ffi_core.abi`` (the C API
mirror, call frames, dtypes, ``ffi_core.abi.native``), ``ffi_core.export``,
``ffi_core.sharding``, ``ffi_core.bridge`` (the kit bridges are built from,
with the native calls ``ffi_core.bridge.cpu`` and ``ffi_core.bridge.cuda``),
``ffi_core.testing``. The names the root
held before are served from there with a DeprecationWarning (``_MOVED``).
"""

from ._cache_dir import CacheDirWarning as CacheDirWarning
from ._cache_dir import cache_root as cache_root
from ._cache_dir import checked_cache_dir as checked_cache_dir
from ._errors import KernelCompileError as KernelCompileError
from ._moved import moved_getattr as _moved_getattr
from ._registry import TargetConflictError as TargetConflictError
from ._version import __version__ as __version__
from .abi import UnsupportedDTypeError as UnsupportedDTypeError
from .export import ExportError as ExportError
from .export import MissingKernelError as MissingKernelError
from .export import UnsignedBlobWarning as UnsignedBlobWarning
from .export import deserialize as deserialize
from .export import export as export
from .export import serialize as serialize
from .sharding import ShardingRule as ShardingRule

__all__ = [
    "CacheDirWarning",
    "ExportError",
    "KernelCompileError",
    "MissingKernelError",
    "ShardingRule",
    "TargetConflictError",
    "UnsignedBlobWarning",
    "UnsupportedDTypeError",
    "__version__",
    "cache_root",
    "checked_cache_dir",
    "deserialize",
    "export",
    "serialize",
]

# The names of the last release that live elsewhere now: old name -> its module.
_MOVED: dict[str, str] = {
    "SUPPORTED_DTYPES": "ffi_core.abi",
    "BufferView": "ffi_core.abi",
    "CallFrame": "ffi_core.abi",
    "DataType": "ffi_core.abi",
    "ErrorCode": "ffi_core.abi",
    "ExecutionStage": "ffi_core.abi",
    "FFIError": "ffi_core.abi",
    "HandlerTraits": "ffi_core.abi",
    "api_version": "ffi_core.abi",
    "c_api_header": "ffi_core.abi",
    "capi": "ffi_core.abi",
    "code_from_dtype": "ffi_core.abi",
    "create_error": "ffi_core.abi",
    "destroy_error": "ffi_core.abi",
    "dtype_from_code": "ffi_core.abi",
    "error_message": "ffi_core.abi",
    "python_handler": "ffi_core.abi",
    "HINT_MIN_ELEMENTS": "ffi_core.bridge",
    "VMAP_METHODS": "ffi_core.bridge",
    "XLA_PLATFORM_NAMES": "ffi_core.bridge",
    "ArraySig": "ffi_core.bridge",
    "BoundPrimitive": "ffi_core.bridge",
    "CallSig": "ffi_core.bridge",
    "KernelDTypes": "ffi_core.bridge",
    "ShapedCall": "ffi_core.bridge",
    "address_bound_values": "ffi_core.bridge",
    "array_sig": "ffi_core.bridge",
    "batch_call": "ffi_core.bridge",
    "batch_to_front": "ffi_core.bridge",
    "check_aliases": "ffi_core.bridge",
    "check_arity": "ffi_core.bridge",
    "check_dtype": "ffi_core.bridge",
    "check_inputs": "ffi_core.bridge",
    "check_sharding_rule": "ffi_core.bridge",
    "check_vmap_method": "ffi_core.bridge",
    "def_eager_impl": "ffi_core.bridge",
    "expand_batch": "ffi_core.bridge",
    "function_digest": "ffi_core.bridge",
    "handler_address": "ffi_core.bridge",
    "hint_source": "ffi_core.bridge",
    "is_output_spec": "ffi_core.bridge",
    "leading_batch": "ffi_core.bridge",
    "lower_with_hint": "ffi_core.bridge",
    "normalize_outs": "ffi_core.bridge",
    "output_avals": "ffi_core.bridge",
    "partitioned_call": "ffi_core.bridge",
    "positional_count": "ffi_core.bridge",
    "raise_on_differentiation": "ffi_core.bridge",
    "register_target": "ffi_core.bridge",
    "registered_targets": "ffi_core.bridge",
    "require_devices_at_lowering": "ffi_core.bridge",
    "resolve_sharding_rule": "ffi_core.bridge",
    "scan_batch": "ffi_core.bridge",
    "shaped_values": "ffi_core.bridge",
    "target_name": "ffi_core.bridge",
    "CALL_SIG_FIELDS": "ffi_core.export",
    "REBUILDER_ENTRY_POINTS": "ffi_core.export",
    "KernelCatalog": "ffi_core.export",
    "StepField": "ffi_core.export",
    "Unexportable": "ffi_core.export",
    "custom_call_targets": "ffi_core.export",
    "recipe_context": "ffi_core.export",
    "record_recipe": "ffi_core.export",
    "register_kernel_acceptor": "ffi_core.export",
    "register_rebuilder": "ffi_core.export",
}

# The names of the last release that have a new name: old name -> (module, new name).
_RENAMED: dict[str, tuple[str, str]] = {
    "PLATFORMS": ("ffi_core.bridge", "TARGET_PLATFORMS"),
}
__getattr__ = _moved_getattr(__name__, _MOVED, _RENAMED)
