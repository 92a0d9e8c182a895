"""Launch configuration, from ffi-core's shared launcher (kept for imports by path)."""

from ffi_core.bridge.cuda import _launch as _shared
from ffi_core.bridge.cuda._launch import *  # noqa: F403 (every name of the shared module)

__all__ = list(_shared.__all__)
