"""cuda-source-ffi: CUDA C++ source, compiled with NVRTC, as JAX GPU operations
launched natively by ffi-core's CUDA launcher."""

from ._module import CudaModule as CudaModule
from ._module import load_cuda_file as load_cuda_file
from ._module import load_cuda_inline as load_cuda_inline
from ._nvrtc import CompiledSource as CompiledSource
from ._nvrtc import NvrtcCacheWarning as NvrtcCacheWarning
from ._nvrtc import NvrtcCompileError as NvrtcCompileError
from ._nvrtc import compile_source as compile_source
from ._nvrtc import entry_params as entry_params
from ._nvrtc import nvrtc_version as nvrtc_version
from ._version import __version__ as __version__

__all__ = [
    "CompiledSource",
    "CudaModule",
    "NvrtcCacheWarning",
    "NvrtcCompileError",
    "__version__",
    "compile_source",
    "entry_params",
    "load_cuda_file",
    "load_cuda_inline",
    "nvrtc_version",
]
