"""The CUDA driver, from ffi-core's shared launcher (kept for imports by path)."""

from ffi_core.bridge.cuda import (
    CTX_FN,
    LAUNCH_FN,
    Driver,
    DriverError,
    NativeDriver,
    driver,
)

__all__ = ["CTX_FN", "LAUNCH_FN", "Driver", "DriverError", "NativeDriver", "driver"]
