"""The CUDA driver entry points the launcher calls, resolved lazily.

Python uses them at lowering time (load a module into each device's primary
context, the context XLA runs in) and in callables (stream-ordered
temporaries). The native handler gets the few it calls per launch as ctypes
function pointers, whose addresses Numba compiles in. ``libcuda`` is opened
with ``ctypes.CDLL`` and its functions get their prototypes on private
``_FuncPtr`` objects of that handle only: nothing process-global changes.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import sys
import threading
from typing import Any

__all__ = [
    "CTX_FN",
    "LAUNCH_FN",
    "Driver",
    "DriverError",
    "NativeDriver",
    "driver",
]

_size = ctypes.c_size_t  # handles and pointers, as integers
_uint = ctypes.c_uint

#: ``CUresult cuLaunchKernel(CUfunction, gx, gy, gz, bx, by, bz, shared, CUstream,
#: void** params, void** extra)``.
LAUNCH_FN = ctypes.CFUNCTYPE(
    ctypes.c_int, _size, _uint, _uint, _uint, _uint, _uint, _uint, _uint, _size, _size, _size
)
#: ``CUresult f(CUcontext)`` / ``CUresult f(CUcontext*)``: the context calls.
CTX_FN = ctypes.CFUNCTYPE(ctypes.c_int, _size)

_LIBRARIES = {"win32": ("nvcuda.dll",)}.get(sys.platform, ("libcuda.so.1", "libcuda.so"))
_ATTR_CC_MAJOR = 75
_ATTR_CC_MINOR = 76
_ATTR_MAX_SHARED_OPTIN = 97
_FUNC_ATTR_MAX_DYNAMIC_SHARED = 8


class DriverError(RuntimeError):
    """A CUDA driver call that failed, with the driver's name for the error."""


@dataclasses.dataclass(frozen=True)
class NativeDriver:
    """The entry points a handler calls per launch, as ctypes function pointers."""

    launch: Any
    ctx_get_current: Any
    ctx_push: Any
    ctx_pop: Any
    error_name: Any  # Python: CUresult -> str, used on the failure path only


class Driver:
    """``libcuda`` through ctypes, initialised once."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self._lock = threading.Lock()
        self._contexts: dict[int, int] = {}
        self._modules: dict[tuple[int, str, str], int] = {}
        self.check(lib.cuInit(0), "cuInit")

    def _fn(self, name: str, restype: Any, *argtypes: Any) -> Any:
        fn = getattr(self.lib, name)
        fn.restype, fn.argtypes = restype, list(argtypes)
        return fn

    def address(self, name: str) -> int:
        return ctypes.cast(getattr(self.lib, name), ctypes.c_void_p).value or 0

    def error_name(self, code: int) -> str:
        text = ctypes.c_char_p()
        fn = self._fn("cuGetErrorName", ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p))
        if fn(code, ctypes.byref(text)) != 0 or not text.value:
            return f"CUDA error {code}"
        return text.value.decode()

    def check(self, code: int, what: str) -> None:
        if code != 0:
            raise DriverError(f"{what} failed with {self.error_name(code)} ({code})")

    @functools.cached_property
    def native(self) -> NativeDriver:
        return NativeDriver(
            launch=LAUNCH_FN(self.address("cuLaunchKernel")),
            ctx_get_current=CTX_FN(self.address("cuCtxGetCurrent")),
            ctx_push=CTX_FN(self.address("cuCtxPushCurrent_v2")),
            ctx_pop=CTX_FN(self.address("cuCtxPopCurrent_v2")),
            error_name=self.error_name,
        )

    def _device(self, ordinal: int) -> int:
        device = ctypes.c_int()
        self.check(self.lib.cuDeviceGet(ctypes.byref(device), ordinal), f"cuDeviceGet({ordinal})")
        return device.value

    def _attribute(self, ordinal: int, attribute: int) -> int:
        value = ctypes.c_int()
        device = self._device(ordinal)
        self.check(
            self.lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, device),
            f"cuDeviceGetAttribute({attribute}, device {ordinal})",
        )
        return value.value

    def compute_capability(self, ordinal: int) -> tuple[int, int]:
        return (
            self._attribute(ordinal, _ATTR_CC_MAJOR),
            self._attribute(ordinal, _ATTR_CC_MINOR),
        )

    def primary_context(self, ordinal: int) -> int:
        """Device ``ordinal``'s primary context (the one XLA uses), retained once."""
        with self._lock:
            if ordinal not in self._contexts:
                ctx = ctypes.c_size_t()
                retain = self._fn(
                    "cuDevicePrimaryCtxRetain", ctypes.c_int, ctypes.c_void_p, ctypes.c_int
                )
                self.check(
                    retain(ctypes.byref(ctx), self._device(ordinal)),
                    f"cuDevicePrimaryCtxRetain(device {ordinal})",
                )
                self._contexts[ordinal] = ctx.value
            return self._contexts[ordinal]

    def load_function(
        self, ordinal: int, image: bytes, entry: str, shared_mem: int
    ) -> tuple[int, int]:
        """``(context, CUfunction)`` of ``entry`` in ``image`` on device ``ordinal``;
        the module is loaded once per context and kept for the process."""
        ctx = self.primary_context(ordinal)
        key = (ctx, hashlib.sha256(image).hexdigest(), entry)
        with self._lock:
            if key not in self._modules:
                self._modules[key] = self._load(ctx, image, entry, shared_mem, ordinal)
            return ctx, self._modules[key]

    def _load(self, ctx: int, image: bytes, entry: str, shared_mem: int, ordinal: int) -> int:
        push = self._fn("cuCtxPushCurrent_v2", ctypes.c_int, ctypes.c_size_t)
        pop = self._fn("cuCtxPopCurrent_v2", ctypes.c_int, ctypes.c_void_p)
        load = self._fn("cuModuleLoadData", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
        get = self._fn(
            "cuModuleGetFunction", ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p
        )
        self.check(push(ctx), "cuCtxPushCurrent")
        try:
            module, function = ctypes.c_size_t(), ctypes.c_size_t()
            self.check(load(ctypes.byref(module), image), f"cuModuleLoadData (device {ordinal})")
            self.check(
                get(ctypes.byref(function), module.value, entry.encode()),
                f"cuModuleGetFunction({entry!r})",
            )
            if shared_mem > 48 * 1024:
                limit = self._attribute(ordinal, _ATTR_MAX_SHARED_OPTIN)
                if shared_mem > limit:
                    raise DriverError(
                        f"`shared_mem` is {shared_mem} bytes but device {ordinal} allows at "
                        f"most {limit} per block"
                    )
                set_attr = self._fn(
                    "cuFuncSetAttribute", ctypes.c_int, ctypes.c_size_t, ctypes.c_int, ctypes.c_int
                )
                self.check(
                    set_attr(function.value, _FUNC_ATTR_MAX_DYNAMIC_SHARED, shared_mem),
                    "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                )
            return function.value
        finally:
            old = ctypes.c_size_t()
            pop(ctypes.byref(old))

    def mem_alloc_async(self, nbytes: int, stream: int) -> int:
        alloc = self._fn(
            "cuMemAllocAsync", ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t
        )
        ptr = ctypes.c_size_t()
        self.check(alloc(ctypes.byref(ptr), nbytes, stream), f"cuMemAllocAsync({nbytes} bytes)")
        return ptr.value

    def mem_free_async(self, ptr: int, stream: int) -> None:
        free = self._fn("cuMemFreeAsync", ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t)
        self.check(free(ptr, stream), "cuMemFreeAsync")


@functools.cache
def driver() -> Driver:
    """The process's CUDA driver, or a RuntimeError saying it is missing."""
    errors = []
    for name in _LIBRARIES:
        try:
            lib = ctypes.CDLL(name)
        except OSError as exc:
            errors.append(str(exc))
            continue
        return Driver(lib)
    raise RuntimeError(
        "the NVIDIA CUDA driver (libcuda) was not found: GPU kernels are launched "
        f"through it, which needs an NVIDIA GPU with its driver installed ({'; '.join(errors)})"
    )
