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
declared once. See
the "Writing a bridge" section of ffi-core's README.

Changed only in minor releases, each change listed in the CHANGELOG.
"""

from .._autodiff import nondifferentiable_call as nondifferentiable_call
from .._autodiff import raise_on_differentiation as raise_on_differentiation
from .._cache_dir import unsafe_reason as unsafe_reason
from .._errors import KernelCompileError as KernelCompileError
from .._errors import WrongPlatformError as WrongPlatformError
from .._install import install_hint as install_hint
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
    "VMAP_METHODS",
    "ArraySig",
    "Bind",
    "BoundCall",
    "BridgeCatalog",
    "CallSig",
    "KernelCall",
    "KernelCompileError",
    "KernelDTypes",
    "KernelInfo",
    "Launch",
    "WrongPlatformError",
    "array_sig",
    "attribute_value",
    "bounds_checked",
    "bounds_checking",
    "bridge_primitive",
    "bridge_primitive_abstract_eval",
    "bridge_primitive_batching",
    "check_kernel_type",
    "function_kernel_fields",
    "install_hint",
    "kernel_digest",
    "kernel_op",
    "nondifferentiable_call",
    "raise_on_differentiation",
    "unsafe_reason",
]
