"""A toy CPU bridge (ffi-core's README): C functions as JAX operations."""

from ._adapter import c_kernel as c_kernel
from ._compile import CCompileError as CCompileError
from ._compile import CFunction as CFunction
from ._compile import compile_c as compile_c

__all__ = ["CCompileError", "CFunction", "c_kernel", "compile_c"]
