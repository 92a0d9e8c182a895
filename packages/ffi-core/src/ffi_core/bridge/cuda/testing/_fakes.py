"""A fake XLA call frame and a fake CUDA driver: a launcher handler runs for
real against them, and each launch is recorded instead of performed."""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ....abi import api_version, code_from_dtype
from ....abi import capi as C
from .._driver import CTX_FN, LAUNCH_FN, NativeDriver

__all__ = ["FakeDriver", "FakeXLA", "Launch", "host_array"]

_API_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


@dataclasses.dataclass
class Launch:
    """One recorded ``cuLaunchKernel``: the raw bytes of each parameter, and
    ``params``, each parameter of 1, 2, 4 or 8 bytes as a signed integer."""

    function: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int
    stream: int
    raw: list[bytes]

    @property
    def params(self) -> list[int]:
        return [int.from_bytes(b, "little", signed=True) for b in self.raw]

    def value(self, i: int, dtype: str) -> Any:
        """Parameter ``i`` read as a ``dtype`` scalar."""
        return np.frombuffer(self.raw[i], dtype=dtype, count=1)[0]

    def array(self, i: int, dtype: Any, shape: Sequence[int]) -> np.ndarray:
        """The host memory that pointer parameter ``i`` points to, as a
        C-contiguous array (writes go to the call's buffer)."""
        return host_array(int(self.value(i, "uint64")), dtype, shape)


class FakeDriver:
    """cuLaunchKernel and the context calls, recording instead of launching.

    ``sizes`` is the byte size of each kernel parameter (an int ``n``: ``n``
    parameters of 8 bytes). ``run``, if given, is called with each
    :class:`Launch` after it is recorded.
    """

    def __init__(
        self,
        sizes: int | Sequence[int],
        current_ctx: int = 0,
        launch_result: int = 0,
        run: Callable[[Launch], None] | None = None,
    ) -> None:
        self.sizes = (8,) * sizes if isinstance(sizes, int) else tuple(sizes)
        self.current_ctx = current_ctx
        self.launch_result = launch_result
        self.launches: list[Launch] = []
        self.pushed: list[int] = []
        self.popped = 0

        def launch(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            pointers = (ctypes.c_size_t * max(len(self.sizes), 1)).from_address(params)
            raw = [ctypes.string_at(p, n) for p, n in zip(pointers, self.sizes, strict=False)]
            record = Launch(f, (gx, gy, gz), (bx, by, bz), shared, stream, raw)
            self.launches.append(record)
            if extra != 0:
                return 1  # CUDA_ERROR_INVALID_VALUE: the launcher passes no extra
            if run is not None:
                run(record)
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

    def _buffers(self, arrays: Sequence[np.ndarray]) -> tuple[Any, Any]:
        bufs = []
        for a in arrays:
            dims = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
            buf = C.XLA_FFI_Buffer(
                struct_size=ctypes.sizeof(C.XLA_FFI_Buffer),
                dtype=code_from_dtype(a.dtype),
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

    def _attrs(self, frame: Any, attrs: Mapping[str, Any]) -> None:
        """Scalar attributes, sorted by name as XLA passes them."""
        items = sorted(attrs.items())
        n = len(items)
        types_ = (ctypes.c_int * max(n, 1))(*[int(C.AttrType.SCALAR)] * n)
        names = (ctypes.POINTER(C.XLA_FFI_ByteSpan) * max(n, 1))()
        values = (ctypes.c_void_p * max(n, 1))()
        for i, (name, value) in enumerate(items):
            scalar = np.asarray(value)
            if scalar.dtype == np.float16:
                scalar = scalar.view(np.uint16)  # XLA has no float16 attributes
            data = ctypes.create_string_buffer(scalar.tobytes(), scalar.dtype.itemsize)
            text = name.encode()
            span = C.XLA_FFI_ByteSpan(
                ctypes.cast(ctypes.c_char_p(text), ctypes.c_void_p), len(text)
            )
            attr = C.XLA_FFI_Scalar(code_from_dtype(scalar.dtype), ctypes.addressof(data))
            names[i] = ctypes.pointer(span)
            values[i] = ctypes.addressof(attr)
            self._keep += [data, text, span, attr]
        frame.attrs.struct_size = ctypes.sizeof(C.XLA_FFI_Attrs)
        frame.attrs.size = n
        frame.attrs.types = types_
        frame.attrs.names = names
        frame.attrs.attrs = values
        self._keep += [types_, names, values]

    def call(
        self,
        handler: Any,
        ins: Sequence[np.ndarray],
        outs: Sequence[np.ndarray],
        attrs: Mapping[str, Any] | None = None,
    ) -> int:
        """Run ``handler`` on a frame with ``ins``, ``outs`` and scalar
        ``attrs``; its return value (0, or an error handle)."""
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
        self._attrs(frame, attrs or {})
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
        if fn(ctypes.addressof(frame)) != 0:
            raise AssertionError("the handler returned an error from the metadata handshake")
        if (meta.api_version.major_version, meta.api_version.minor_version) != api_version():
            raise AssertionError("the handler answered with another FFI API version")
        return meta.traits


def host_array(address: int, dtype: Any, shape: Sequence[int], strides: Any = None) -> np.ndarray:
    """The host memory at ``address`` as an array (empty arrays need none)."""
    dt = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if nbytes == 0:
        return np.empty(shape, dt)
    memory = (ctypes.c_char * nbytes).from_address(address)
    return np.ndarray(shape, dt, buffer=memory, strides=strides)
