"""ffi-core: custom kernels as JAX operations through XLA's typed FFI.

What a user of an operation needs is here: ``export``/``serialize``/
``deserialize`` (``jax.export`` round trips for functions that call kernels),
``ShardingRule``, the error types every bridge raises, and the cache-directory
settings. The layers below it are folders: ``ffi_core.abi`` (the C API
mirror, call frames, dtypes, ``ffi_core.abi.native``), ``ffi_core.export``,
``ffi_core.sharding``, ``ffi_core.bridge`` (the kit bridges are built from,
with the native calls ``ffi_core.bridge.cpu`` and ``ffi_core.bridge.cuda``),
``ffi_core.testing``. The names the root
held before are served from there with a DeprecationWarning (``ffi_core._moved.MOVED``).
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

# The names of the last release that moved or have a new name: ffi_core._moved's tables.
__getattr__ = _moved_getattr(__name__)
