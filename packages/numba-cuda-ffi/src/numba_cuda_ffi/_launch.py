"""Launch configuration, from ffi-core's shared launcher (for code that imports it from numba-cuda-ffi).

The limits it checks against (``MAX_BLOCK``, ``MAX_GRID``, ...) are
``ffi_core.bridge.cuda``'s.
"""

from ffi_core.bridge.cuda import LaunchConfig, launch_config

__all__ = ["LaunchConfig", "launch_config"]
