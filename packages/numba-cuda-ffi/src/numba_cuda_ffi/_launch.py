"""Launch configuration, from ffi-core's shared launcher (kept for imports by path)."""

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
