"""numba-cpu-ffi: Numba CPU kernels as native-speed JAX operations."""

from ffi_core.abi.native import HandlerCacheWarning as HandlerCacheWarning

from ._cache import add_prebuilt_dir as add_prebuilt_dir
from ._cache import cache_dir as cache_dir
from ._cache import prebuilt_dirs as prebuilt_dirs
from ._codegen import parallel_min_elements as parallel_min_elements
from ._compile import KernelCompileError as KernelCompileError
from ._kernel import numba_kernel as numba_kernel
from ._spec import SUPPORTED_DTYPES as SUPPORTED_DTYPES
from ._spec import VMAP_METHODS as VMAP_METHODS
from ._threads import configure_threads as configure_threads
from ._version import __version__ as __version__

__all__ = [
    "SUPPORTED_DTYPES",
    "VMAP_METHODS",
    "HandlerCacheWarning",
    "KernelCompileError",
    "__version__",
    "add_prebuilt_dir",
    "cache_dir",
    "configure_threads",
    "numba_kernel",
    "parallel_min_elements",
    "prebuilt_dirs",
]


def __getattr__(name: str) -> object:
    # ``numba_kernel_call_p``: a deprecated alias of ffi-core's CPU primitive.
    if name == "numba_kernel_call_p":
        import warnings

        from ffi_core.bridge.cpu import cpu_call_p

        warnings.warn(
            "numba_cpu_ffi.numba_kernel_call_p is ffi_core.bridge.cpu.cpu_call_p; import it "
            "from there (numba_kernel_call_p goes away in the next minor release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return cpu_call_p
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
