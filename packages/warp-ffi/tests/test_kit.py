"""What warp_kernel shares with every bridge: the vmap methods, the dtype
table and the compile-error base (Warp kernels keep their own gradient)."""

from __future__ import annotations

import ffi_core
import ffi_core.bridge
import warp_ffi
from warp_ffi import VMAP_METHODS, KernelCompileError


def test_shared_with_every_bridge():
    assert VMAP_METHODS is ffi_core.bridge.VMAP_METHODS
    assert issubclass(KernelCompileError, ffi_core.KernelCompileError)
    assert issubclass(KernelCompileError, TypeError)
    assert warp_ffi._spec.DTYPES.names == warp_ffi.SUPPORTED_DTYPES
    assert warp_ffi._spec.DTYPES.kernels == "Warp kernels"
