"""warp-ffi: NVIDIA Warp kernels as native-speed JAX operations, with vmap and
grad through Warp's adjoint kernels."""

from ._codegen import HANDLER_CACHE_ENV as HANDLER_CACHE_ENV
from ._codegen import KernelCompileError as KernelCompileError
from ._codegen import handler_cache_dir as handler_cache_dir
from ._kernel import VMAP_METHODS as VMAP_METHODS
from ._kernel import warp_kernel as warp_kernel
from ._primitive import warp_kernel_call_p as warp_kernel_call_p
from ._version import __version__ as __version__
from ._warp import SUPPORTED_DTYPES as SUPPORTED_DTYPES
from ._warp import jaxinfo_to_warpinfo as jaxinfo_to_warpinfo
from ._warp import jaxtype_to_warptype as jaxtype_to_warptype

__all__ = [
    "HANDLER_CACHE_ENV",
    "SUPPORTED_DTYPES",
    "VMAP_METHODS",
    "KernelCompileError",
    "__version__",
    "handler_cache_dir",
    "jaxinfo_to_warpinfo",
    "jaxtype_to_warptype",
    "warp_kernel",
    "warp_kernel_call_p",
]
