"""The CUDA driver, from ffi-core's shared launcher (for code that imports it from numba-cuda-ffi)."""

from ffi_core.bridge.cuda import (
    CTX_FN,
    LAUNCH_FN,
    Driver,
    DriverError,
    NativeDriver,
    driver,
)

__all__ = ["CTX_FN", "LAUNCH_FN", "Driver", "DriverError", "NativeDriver", "driver"]
