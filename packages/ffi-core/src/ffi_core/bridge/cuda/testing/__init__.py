"""The launcher's test harness: a fake XLA call frame and a fake CUDA driver,
and the emulated GPU.

A handler made by :func:`ffi_core.bridge.cuda.build_launch_handler` is real compiled code.
On a machine without a GPU it runs here against a call frame built with ctypes
(host arrays stand in for device buffers) and driver entry points that record
each launch instead of performing it, so every bridge can check its parameter
packing byte for byte. ``FakeDriver(..., run=fn)`` also calls ``fn`` with each
launch, which lets a test execute a CPU stand-in of the kernel (Triton's
interpreter, a NumPy function) on the very pointers the handler packed.
:func:`emulate` goes one step further: the whole CUDA path of a JAX call
(lowering, registration, the FFI call from XLA) runs on the CPU, with an
:class:`EmulatedGPU` as the driver.
"""

from ._emulated import EMULATED_STREAM as EMULATED_STREAM
from ._emulated import EmulatedDevice as EmulatedDevice
from ._emulated import EmulatedGPU as EmulatedGPU
from ._emulated import EmulatedLaunch as EmulatedLaunch
from ._emulated import emulate as emulate
from ._emulated import emulated_gpu_fixture as emulated_gpu_fixture
from ._emulated import register_on_cpu as register_on_cpu
from ._fakes import FakeDriver as FakeDriver
from ._fakes import FakeXLA as FakeXLA
from ._fakes import Launch as Launch
from ._fakes import host_array as host_array

__all__ = [
    "EMULATED_STREAM",
    "EmulatedDevice",
    "EmulatedGPU",
    "EmulatedLaunch",
    "FakeDriver",
    "FakeXLA",
    "Launch",
    "emulate",
    "emulated_gpu_fixture",
    "host_array",
    "register_on_cpu",
]

# Documented and snapshot under this module's name, where users import them.
for _name in ("EmulatedDevice", "EmulatedGPU", "EmulatedLaunch", "FakeDriver", "FakeXLA", "Launch"):
    globals()[_name].__module__ = __name__
del _name
