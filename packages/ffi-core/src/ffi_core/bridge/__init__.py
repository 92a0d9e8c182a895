"""The bridge kit: what a language bridge is built from (semi-public, for
bridge authors).

A bridge says only what is its language's: validate the kernel object
(a ``KernelInfo`` subclass), compile it, describe its parameters (a planner
for ``ffi_core.bridge.cuda`` or ``ffi_core.bridge.cpu``, or a primitive of its
own) and return what to bind (a ``Bind``). Everything on the JAX side is here, once:
``kernel_op`` builds the bridge's public function (outs, vmap method,
aliases, arity, inputs, sharding rule, bind, naming), ``BridgeCatalog``
remembers its kernels for ``ffi_core.deserialize`` and writes their recipe
steps, ``CallSig`` carries the bridge's extra signature fields,
``bridge_primitive`` makes a primitive with the rules every bridge primitive
shares, and the dtype tables and vmap methods every bridge shares are
declared once. The pieces these are made of are here too, for a bridge
with a primitive of its own: content-addressed target names and their
registry (``target_name``, ``register_target``), the argument checks, the
``vmap`` and sharding pieces, the cost hint of large calls. See
the "Writing a bridge" section of ffi-core's README.

Changed only in minor releases, each change listed in the CHANGELOG.
"""

from .._autodiff import derivative_fix as derivative_fix
from .._autodiff import nondifferentiable_call as nondifferentiable_call
from .._autodiff import raise_on_differentiation as raise_on_differentiation
from .._batching import batch_call as batch_call
from .._batching import batch_to_front as batch_to_front
from .._batching import expand_batch as expand_batch
from .._batching import leading_batch as leading_batch
from .._batching import scan_batch as scan_batch
from .._cache_dir import env_cache_dir as env_cache_dir
from .._cache_dir import read_cache_file as read_cache_file
from .._cache_dir import unsafe_reason as unsafe_reason
from .._checks import check_aliases as check_aliases
from .._checks import check_arity as check_arity
from .._checks import check_inputs as check_inputs
from .._checks import check_static_shapes as check_static_shapes
from .._checks import positional_count as positional_count
from .._checks import scalar_value as scalar_value
from .._cost_hint import HINT_MIN_ELEMENTS as HINT_MIN_ELEMENTS
from .._cost_hint import hint_source as hint_source
from .._cost_hint import lower_with_hint as lower_with_hint
from .._digest import address_bound_values as address_bound_values
from .._digest import function_digest as function_digest
from .._errors import KernelCompileError as KernelCompileError
from .._errors import WrongPlatformError as WrongPlatformError
from .._install import install_hint as install_hint
from .._jax_compat import def_eager_impl as def_eager_impl
from .._jax_compat import distributed_client as distributed_client
from .._jax_compat import require_devices_at_lowering as require_devices_at_lowering
from .._moved import moved_getattr as _moved_getattr
from .._outs import is_output_spec as is_output_spec
from .._outs import normalize_outs as normalize_outs
from .._outs import output_avals as output_avals
from .._registry import TARGET_PLATFORMS as TARGET_PLATFORMS
from .._registry import XLA_PLATFORM_NAMES as XLA_PLATFORM_NAMES
from .._registry import handler_address as handler_address
from .._registry import register_target as register_target
from .._registry import registered_targets as registered_targets
from .._registry import target_name as target_name
from .._rules import Bind as Bind
from .._rules import bridge_primitive as bridge_primitive
from .._rules import bridge_primitive_abstract_eval as bridge_primitive_abstract_eval
from .._rules import bridge_primitive_batching as bridge_primitive_batching
from .._spec import BASIC_DTYPES as BASIC_DTYPES
from .._spec import COMPLEX_DTYPES as COMPLEX_DTYPES
from .._spec import VMAP_METHODS as VMAP_METHODS
from .._spec import ArraySig as ArraySig
from .._spec import CallSig as CallSig
from .._spec import KernelDTypes as KernelDTypes
from .._spec import array_sig as array_sig
from .._spec import attribute_value as attribute_value
from .._spec import check_dtype as check_dtype
from .._spec import check_vmap_method as check_vmap_method
from ..abi._cache_files import directory_lock as directory_lock
from ..sharding._partition import BoundPrimitive as BoundPrimitive
from ..sharding._partition import ShapedCall as ShapedCall
from ..sharding._partition import partitioned_call as partitioned_call
from ..sharding._partition import shaped_values as shaped_values
from ..sharding._rule import check_sharding_rule as check_sharding_rule
from ..sharding._rule import resolve_sharding_rule as resolve_sharding_rule
from ._bounds import BOUNDSCHECK_ENV as BOUNDSCHECK_ENV
from ._bounds import bounds_checked as bounds_checked
from ._bounds import bounds_checking as bounds_checking
from ._catalog import BridgeCatalog as BridgeCatalog
from ._info import KernelInfo as KernelInfo
from ._info import check_kernel_type as check_kernel_type
from ._info import function_kernel_fields as function_kernel_fields
from ._info import kernel_digest as kernel_digest
from ._op import BoundCall as BoundCall
from ._op import KernelCall as KernelCall
from ._op import Launch as Launch
from ._op import kernel_op as kernel_op

__all__ = [
    "BASIC_DTYPES",
    "BOUNDSCHECK_ENV",
    "COMPLEX_DTYPES",
    "HINT_MIN_ELEMENTS",
    "TARGET_PLATFORMS",
    "VMAP_METHODS",
    "XLA_PLATFORM_NAMES",
    "ArraySig",
    "Bind",
    "BoundCall",
    "BoundPrimitive",
    "BridgeCatalog",
    "CallSig",
    "KernelCall",
    "KernelCompileError",
    "KernelDTypes",
    "KernelInfo",
    "Launch",
    "ShapedCall",
    "WrongPlatformError",
    "address_bound_values",
    "array_sig",
    "attribute_value",
    "batch_call",
    "batch_to_front",
    "bounds_checked",
    "bounds_checking",
    "bridge_primitive",
    "bridge_primitive_abstract_eval",
    "bridge_primitive_batching",
    "check_aliases",
    "check_arity",
    "check_dtype",
    "check_inputs",
    "check_kernel_type",
    "check_sharding_rule",
    "check_static_shapes",
    "check_vmap_method",
    "def_eager_impl",
    "derivative_fix",
    "directory_lock",
    "distributed_client",
    "env_cache_dir",
    "expand_batch",
    "function_digest",
    "function_kernel_fields",
    "handler_address",
    "hint_source",
    "install_hint",
    "is_output_spec",
    "kernel_digest",
    "kernel_op",
    "leading_batch",
    "lower_with_hint",
    "nondifferentiable_call",
    "normalize_outs",
    "output_avals",
    "partitioned_call",
    "positional_count",
    "raise_on_differentiation",
    "read_cache_file",
    "register_target",
    "registered_targets",
    "require_devices_at_lowering",
    "resolve_sharding_rule",
    "scalar_value",
    "scan_batch",
    "shaped_values",
    "target_name",
    "unsafe_reason",
]

# The names of the last release that moved or have a new name: ffi_core._moved's tables.
__getattr__ = _moved_getattr(__name__)
