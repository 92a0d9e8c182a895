"""numba-cuda-ffi: Numba CUDA kernels as JAX GPU operations, launched natively."""

from ._callable import numba_cuda_callable as numba_cuda_callable
from ._callable import temporary as temporary
from ._compile import KernelCompileError as KernelCompileError
from ._kernel import numba_cuda_kernel as numba_cuda_kernel
from ._launch import LaunchConfig as LaunchConfig
from ._launch import launch_config as launch_config
from ._spec import CALLABLE_VMAP_METHODS as CALLABLE_VMAP_METHODS
from ._spec import SUPPORTED_DTYPES as SUPPORTED_DTYPES
from ._spec import VMAP_METHODS as VMAP_METHODS
from ._version import __version__ as __version__

__all__ = [
    "CALLABLE_VMAP_METHODS",
    "SUPPORTED_DTYPES",
    "VMAP_METHODS",
    "KernelCompileError",
    "LaunchConfig",
    "__version__",
    "launch_config",
    "numba_cuda_callable",
    "numba_cuda_kernel",
    "temporary",
]
