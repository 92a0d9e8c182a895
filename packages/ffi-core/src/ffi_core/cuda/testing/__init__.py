"""Moved to :mod:`ffi_core.bridge.cuda.testing`: each name here warns and forwards."""

from ..._moved import forward

__moved_to__ = "ffi_core.bridge.cuda.testing"
_NAMES = {
    "EMULATED_STREAM": "EMULATED_STREAM",
    "EmulatedDevice": "EmulatedDevice",
    "EmulatedGPU": "EmulatedGPU",
    "EmulatedLaunch": "EmulatedLaunch",
    "FakeDriver": "FakeDriver",
    "FakeXLA": "FakeXLA",
    "Launch": "Launch",
    "emulate": "emulate",
    "emulated_gpu_fixture": "emulated_gpu_fixture",
    "host_array": "host_array",
    "register_on_cpu": "register_on_cpu",
}
__all__ = sorted(_NAMES)
__getattr__ = forward(__name__, __moved_to__, _NAMES)
