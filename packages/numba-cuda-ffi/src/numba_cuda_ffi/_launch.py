"""Launch configuration, from ffi-core's shared launcher (for code that imports it from numba-cuda-ffi)."""

from ffi_core.bridge.cuda import (
    MAX_BLOCK,
    MAX_GRID,
    MAX_SHARED_MEM,
    MAX_THREADS_PER_BLOCK,
    STATIC_SHARED_MEM,
    LaunchConfig,
    launch_config,
)

__all__ = [
    "MAX_BLOCK",
    "MAX_GRID",
    "MAX_SHARED_MEM",
    "MAX_THREADS_PER_BLOCK",
    "STATIC_SHARED_MEM",
    "LaunchConfig",
    "launch_config",
]
