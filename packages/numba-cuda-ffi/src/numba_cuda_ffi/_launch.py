"""Launch configuration, from ffi-core's shared launcher (for code that imports it from numba-cuda-ffi)."""

from ffi_core.cuda import _launch as _shared
from ffi_core.cuda._launch import *  # noqa: F403 (every name of the shared module)

__all__ = list(_shared.__all__)
