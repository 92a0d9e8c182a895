"""Compile and register the FFI target of one (kernel, signature, launch).

At lowering time, on the machine that will run the computation, ffi-core's
launcher builds the handler once, asks for the kernel compiled for the compute
capability of each of JAX's local GPUs, loads it once into each device's
primary context and registers the handler under a name derived from content.
"""

from __future__ import annotations

from ffi_core.bridge.cuda import LaunchPlan, ensure_target

from ._compile import compile_kernel
from ._handler import launch_spec
from ._launch import LaunchConfig
from ._spec import CallSig, KernelInfo

__all__ = ["kernel_target"]


def kernel_target(info: KernelInfo, sig: CallSig, launch: LaunchConfig) -> str:
    """The registered FFI target name for ``info``'s kernel, ``sig`` and ``launch``."""

    def image(cc: tuple[int, int]) -> tuple[bytes, str]:
        compiled = compile_kernel(info, sig.kernel_arrays, cc)
        return compiled.image, compiled.entry

    spec = launch_spec(sig, launch)
    plan = LaunchPlan(
        f"numba_cuda.{info.name}",
        (info.digest, repr(sig), repr(launch)),
        spec.layout,
        spec.launch,
        image,
        spec=spec,
        label=info.label,
    )
    return ensure_target(plan)
