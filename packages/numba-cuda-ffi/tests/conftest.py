"""Shared fixtures: a fake XLA call frame and fake CUDA driver entry points.

The native handler is real compiled code; on a machine without a GPU it is run
against a call frame built here with ctypes and driver functions that record
what they are given, so the parameter packing is checked byte for byte.
"""

from __future__ import annotations

import ctypes
import dataclasses
from typing import Any

import ffi_core
import numpy as np
import pytest
from ffi_core import capi as C
from numba_cuda_ffi._driver import CTX_FN, LAUNCH_FN, NativeDriver

_API_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


def cuda_available() -> bool:
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


#: For GPU tests: they run unchanged where numba-cuda sees a GPU.
needs_gpu = pytest.mark.skipif(
    not cuda_available(), reason="needs an NVIDIA GPU (numba.cuda.is_available() is False)"
)


@dataclasses.dataclass
class Launch:
    function: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int
    stream: int
    params: list[int]


class FakeDriver:
    """cuLaunchKernel and the context calls, recording instead of launching."""

    def __init__(self, n_params: int, current_ctx: int = 0, launch_result: int = 0) -> None:
        self.n_params = n_params
        self.current_ctx = current_ctx
        self.launch_result = launch_result
        self.launches: list[Launch] = []
        self.pushed: list[int] = []
        self.popped = 0

        def launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            pointers = (ctypes.c_size_t * self.n_params).from_address(params)
            values = [ctypes.c_int64.from_address(p).value for p in pointers]
            self.launches.append(Launch(f, (gx, gy, gz), (bx, by, bz), shared, stream, values))
            assert extra == 0
            return self.launch_result

        def get_current(out):
            ctypes.c_size_t.from_address(out).value = self.current_ctx
            return 0

        def push(ctx):
            self.pushed.append(ctx)
            return 0

        def pop(out):
            self.popped += 1
            return 0

        self.native = NativeDriver(
            launch=LAUNCH_FN(launch),
            ctx_get_current=CTX_FN(get_current),
            ctx_push=CTX_FN(push),
            ctx_pop=CTX_FN(pop),
            error_name=lambda code: {700: "CUDA_ERROR_ILLEGAL_ADDRESS"}.get(code, "UNKNOWN"),
        )


class FakeXLA:
    """An ``XLA_FFI_Api`` table whose entries are Python, and call frames."""

    def __init__(self, stream: int = 0x5000, ordinal: int = 0) -> None:
        self.stream = stream
        self.ordinal = ordinal
        self.errors: list[tuple[str, int]] = []
        self._keep: list[Any] = []

        def error_create(args):
            a = C.XLA_FFI_Error_Create_Args.from_address(args)
            self.errors.append((a.message.decode(), a.errc))
            return len(self.errors)  # a non-null "error" handle

        def stream_get(args):
            C.XLA_FFI_Stream_Get_Args.from_address(args).stream = self.stream
            return 0

        def ordinal_get(args):
            C.XLA_FFI_DeviceOrdinal_Get_Args.from_address(args).device_ordinal = self.ordinal
            return 0

        self.api = C.XLA_FFI_Api()
        for field, fn in (
            ("XLA_FFI_Error_Create", error_create),
            ("XLA_FFI_Stream_Get", stream_get),
            ("XLA_FFI_DeviceOrdinal_Get", ordinal_get),
        ):
            cb = _API_FN(fn)
            self._keep.append(cb)
            setattr(self.api, field, ctypes.cast(cb, ctypes.c_void_p).value)

    def _buffers(self, arrays: list[np.ndarray]) -> tuple[Any, Any]:
        bufs = []
        for a in arrays:
            dims = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
            buf = C.XLA_FFI_Buffer(
                struct_size=ctypes.sizeof(C.XLA_FFI_Buffer),
                dtype=ffi_core.code_from_dtype(a.dtype),
                data=a.ctypes.data if a.size else None,
                rank=a.ndim,
                dims=ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64)),
            )
            self._keep += [dims, buf]
            bufs.append(ctypes.addressof(buf))
        pointers = (ctypes.c_void_p * max(len(bufs), 1))(*bufs)
        types_ = (ctypes.c_int * max(len(bufs), 1))()
        self._keep += [pointers, types_]
        return pointers, types_

    def call(self, handler: Any, ins: list[np.ndarray], outs: list[np.ndarray]) -> int:
        """Run ``handler`` on a frame with ``ins`` and ``outs``; its return value."""
        frame = C.XLA_FFI_CallFrame(struct_size=ctypes.sizeof(C.XLA_FFI_CallFrame))
        frame.api = ctypes.addressof(self.api)
        frame.ctx = 0x1234
        frame.stage = int(C.ExecutionStage.EXECUTE)
        args, arg_types = self._buffers(ins)
        rets, ret_types = self._buffers(outs)
        frame.args.struct_size = ctypes.sizeof(C.XLA_FFI_Args)
        frame.args.size = len(ins)
        frame.args.types = arg_types
        frame.args.args = args
        frame.rets.struct_size = ctypes.sizeof(C.XLA_FFI_Rets)
        frame.rets.size = len(outs)
        frame.rets.types = ret_types
        frame.rets.rets = rets
        self._keep.append(frame)
        fn = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p)(handler.address)
        return fn(ctypes.addressof(frame))

    def metadata(self, handler: Any) -> int:
        """Run the metadata handshake; the traits the handler declares."""
        meta = C.XLA_FFI_Metadata(struct_size=ctypes.sizeof(C.XLA_FFI_Metadata))
        ext = C.XLA_FFI_Metadata_Extension()
        ext.extension_base.struct_size = ctypes.sizeof(C.XLA_FFI_Metadata_Extension)
        ext.extension_base.type = int(C.ExtensionType.METADATA)
        ext.metadata = ctypes.pointer(meta)
        frame = C.XLA_FFI_CallFrame(struct_size=ctypes.sizeof(C.XLA_FFI_CallFrame))
        frame.extension_start = ctypes.cast(
            ctypes.pointer(ext), ctypes.POINTER(C.XLA_FFI_Extension_Base)
        )
        frame.api = ctypes.addressof(self.api)
        self._keep += [meta, ext, frame]
        fn = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p)(handler.address)
        assert fn(ctypes.addressof(frame)) == 0
        assert (meta.api_version.major_version, meta.api_version.minor_version) == (
            ffi_core.api_version()
        )
        return meta.traits


@pytest.fixture
def fake_xla() -> FakeXLA:
    return FakeXLA()


@pytest.fixture
def fake_driver() -> type[FakeDriver]:
    return FakeDriver
