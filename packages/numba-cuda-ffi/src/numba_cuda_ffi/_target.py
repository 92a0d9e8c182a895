"""Compile, load and register the FFI target of one (kernel, signature, launch).

At lowering time, on the machine that will run the computation: compile the
kernel for the compute capability of each of JAX's local GPUs, load the module
once into each device's primary context (the context XLA runs in), fill the
handler's per-device function table and register the handler, once, under a
name derived from content.
"""

from __future__ import annotations

import threading

from ffi_core import HandlerTraits, register_target, target_name

from ._compile import compile_kernel
from ._driver import driver
from ._handler import Handler, build_handler
from ._launch import LaunchConfig
from ._runtime import cuda_devices
from ._spec import CallSig, KernelInfo

__all__ = ["ensure_target", "label"]

_lock = threading.Lock()
_handlers: dict[tuple[KernelInfo, CallSig, LaunchConfig], tuple[str, Handler]] = {}


def label(info: KernelInfo) -> str:
    return f"numba cuda kernel '{info.name}'"


def _ordinal(device: object) -> int:
    hardware_id = getattr(device, "local_hardware_id", None)
    return int(hardware_id if hardware_id is not None else device.id)  # type: ignore[attr-defined]


def ensure_target(info: KernelInfo, sig: CallSig, launch: LaunchConfig) -> str:
    """The registered FFI target name for ``info``'s kernel, ``sig`` and ``launch``."""
    devices = cuda_devices(label(info))
    drv = driver()
    key = (info, sig, launch)
    with _lock:
        entry = _handlers.get(key)
        if entry is None:
            name = target_name(f"numba_cuda.{info.name}", info.digest, repr(sig), repr(launch))
            entry = (name, build_handler(sig, launch, label(info), drv.native))
            _handlers[key] = entry
        name, handler = entry
        for device in devices:
            ordinal = _ordinal(device)
            if handler.has_device(ordinal):
                continue
            compiled = compile_kernel(info, sig.kernel_arrays, drv.compute_capability(ordinal))
            context, function = drv.load_function(
                ordinal, compiled.image, compiled.entry, launch.shared_mem
            )
            handler.set_device(ordinal, context, function)
    register_target(
        name,
        handler.cfunc,
        content=f"{info.qualname}:{info.digest}:{sig!r}:{launch!r}",
        platform="cuda",
        traits=HandlerTraits.COMMAND_BUFFER_COMPATIBLE,
        pin=handler.pinned(),
    )
    return name
