"""What warp_kernel shares with every bridge: ffi-core's conformance suite
run over warp-ffi (names, compile error, vmap methods, dtype messages; Warp
kernels keep their own gradient, so no refusal is checked)."""

from __future__ import annotations

import warp as wp
from ffi_core.testing import BridgeUnderTest, conformance_tests
from warp_ffi import SUPPORTED_DTYPES, VMAP_METHODS, KernelCompileError, warp_kernel


@wp.kernel
def scale(x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = 2.0 * x[i]


WARP = BridgeUnderTest(
    kernel="warp kernel 'scale'",
    make=lambda outs, **options: warp_kernel(scale, outs, **options),
    compile_error=KernelCompileError,
    vmap_methods=VMAP_METHODS,
    dtypes_kernels="Warp kernels",
    supported_dtypes=SUPPORTED_DTYPES,
    differentiable=True,
)

TestConformance = conformance_tests(WARP)
