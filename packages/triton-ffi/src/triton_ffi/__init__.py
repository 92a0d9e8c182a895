"""triton-ffi: Triton kernels as JAX GPU operations, compiled once and launched
natively by ffi-core's CUDA launcher (no Python per call, graph-capturable)."""

from ._compile import DTYPES as DTYPES
from ._compile import CompiledTriton as CompiledTriton
from ._compile import TritonCompileError as TritonCompileError
from ._compile import TritonParam as TritonParam
from ._compile import compile_triton as compile_triton
from ._interpret import run_interpreted as run_interpreted
from ._kernel import SUPPORTED_DTYPES as SUPPORTED_DTYPES
from ._kernel import triton_kernel as triton_kernel
from ._version import __version__ as __version__

__all__ = [
    "DTYPES",
    "SUPPORTED_DTYPES",
    "CompiledTriton",
    "TritonCompileError",
    "TritonParam",
    "__version__",
    "compile_triton",
    "run_interpreted",
    "triton_kernel",
]
