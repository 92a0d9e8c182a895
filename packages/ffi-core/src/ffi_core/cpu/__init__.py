"""Moved to :mod:`ffi_core.bridge.cpu`: each name here warns and forwards."""

from .._moved import forward

__moved_to__ = "ffi_core.bridge.cpu"
_NAMES = {
    "AttrSig": "AttrSig",
    "BoundHandler": "BoundHandler",
    "CpuPlan": "CpuPlan",
    "CpuPlanner": "CpuPlanner",
    "HandlerBody": "HandlerBody",
    "HandlerRecord": "HandlerRecord",
    "HandlerSpec": "HandlerSpec",
    "bind_record": "bind_record",
    "build_handler": "build_cpu_handler",
    "cpu_call": "cpu_call",
    "cpu_call_p": "cpu_call_p",
    "ensure_target": "ensure_target",
    "handler_globals": "handler_globals",
    "handler_source": "cpu_handler_source",
    "lower_cpu_call": "lower_cpu_call",
}
__all__ = sorted(_NAMES)
__getattr__ = forward(__name__, __moved_to__, _NAMES)
