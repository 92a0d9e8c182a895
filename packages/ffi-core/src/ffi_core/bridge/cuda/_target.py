"""Load a kernel on every local GPU and register its handler, once per content.

At lowering time, on the machine that will run the computation: build the
handler of one :class:`LaunchSpec` (once per process), get the kernel's image
for the compute capability of each of JAX's local GPUs from the bridge, load
it once into each device's primary context (the context XLA runs in), fill the
handler's per-device function table and register the handler under a name
derived from content.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable

from ..._registry import register_target, target_name
from ...abi import HandlerTraits
from ._driver import driver
from ._handler import Handler, LaunchSpec, build_launch_handler
from ._launch import LaunchConfig
from ._layout import ParamLayout

__all__ = [
    "KernelImage",
    "LaunchPlan",
    "cuda_devices",
    "device_ordinal",
    "ensure_target",
    "local_capabilities",
]

#: ``image(compute_capability) -> (image bytes, entry name)``: a cubin (or
#: NUL-terminated PTX) holding the kernel's entry, built for that device.
KernelImage = Callable[[tuple[int, int]], tuple[bytes, str]]


@dataclasses.dataclass(frozen=True)
class LaunchPlan:
    """One kernel's target for one signature: ``prefix`` and ``parts`` name it
    (``parts`` identify the kernel's code and all else the handler depends
    on), ``layout`` and ``launch`` make the handler, ``image`` builds the
    kernel for a compute capability. ``spec`` (the handler's ``LaunchSpec``)
    and ``label`` (the kernel's name in messages) are set at lowering, by
    ``lower_launch``, before ``ensure_target`` takes the plan."""

    prefix: str
    parts: tuple[str, ...]
    layout: ParamLayout
    launch: LaunchConfig
    image: KernelImage = dataclasses.field(compare=False)
    spec: LaunchSpec | None = None
    label: str = dataclasses.field(default="", compare=False)


_lock = threading.Lock()
_handlers: dict[tuple[str, tuple[str, ...], LaunchSpec], tuple[str, Handler]] = {}


@functools.cache
def _jax_cuda_devices() -> tuple[object, ...]:
    import jax

    try:
        return tuple(jax.local_devices(backend="cuda"))
    except RuntimeError:
        return ()


def cuda_devices(what: str) -> tuple[object, ...]:
    """JAX's local CUDA devices, or a RuntimeError saying ``what`` needs one."""
    devices = _jax_cuda_devices()
    if not devices:
        raise RuntimeError(
            f"{what} runs on NVIDIA GPUs, but JAX has no CUDA device here; install "
            'a CUDA build of JAX (`uv add "jax[cuda13]"`) on a machine with an NVIDIA GPU '
            "and driver"
        )
    return devices


def device_ordinal(device: object) -> int:
    """The CUDA ordinal of a JAX device (its local hardware id)."""
    hardware_id = getattr(device, "local_hardware_id", None)
    return int(hardware_id if hardware_id is not None else device.id)  # type: ignore[attr-defined]


def local_capabilities(what: str) -> tuple[tuple[int, int], ...]:
    """The compute capability of each of JAX's local GPUs, in device order
    (a RuntimeError saying ``what`` needs one where there is none)."""
    devices = cuda_devices(what)  # first: without a GPU, its message is the one to act on
    drv = driver()
    return tuple(drv.compute_capability(device_ordinal(d)) for d in devices)


def ensure_target(plan: LaunchPlan) -> str:
    """The registered FFI target name of ``plan``'s kernel launched as
    ``plan.spec``: the handler built once per process, the kernel's image
    (``plan.image``, cached by the bridge) loaded once into each local GPU's
    primary context. ``plan.parts`` must identify all that the spec was made
    from (the kernel's code digest, its signature and launch), so a changed
    kernel gets another target; ``plan.label`` names the kernel in errors.
    """
    if plan.spec is None:
        raise ValueError(f"{plan.prefix}: `plan.spec` is None; lower_launch sets it")
    prefix, parts, spec, label, image = plan.prefix, plan.parts, plan.spec, plan.label, plan.image
    devices = cuda_devices(label)
    drv = driver()
    key = (prefix, parts, spec)
    with _lock:
        entry = _handlers.get(key)
        if entry is None:
            name = target_name(prefix, *parts)
            entry = (name, build_launch_handler(spec, label, drv.native))
            _handlers[key] = entry
        name, handler = entry
        for device in devices:
            ordinal = device_ordinal(device)
            if handler.has_device(ordinal):
                continue
            data, entry_name = image(drv.compute_capability(ordinal))
            context, function = drv.load_function(ordinal, data, entry_name, spec.launch.shared_mem)
            handler.set_device(ordinal, context, function)
    register_target(
        name,
        handler.cfunc,
        content=":".join((prefix, *parts, repr(spec))),
        platform="cuda",
        traits=HandlerTraits.COMMAND_BUFFER_COMPATIBLE,
        pin=handler.pinned(),
    )
    return name
