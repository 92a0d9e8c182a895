"""The launcher's test harness: a fake XLA call frame and a fake CUDA driver.

A handler made by :func:`ffi_core.cuda.build_handler` is real compiled code.
On a machine without a GPU it runs here against a call frame built with ctypes
(host arrays stand in for device buffers) and driver entry points that record
each launch instead of performing it, so every bridge can check its parameter
packing byte for byte. ``FakeDriver(..., run=fn)`` also calls ``fn`` with each
launch, which lets a test execute a CPU stand-in of the kernel (Triton's
interpreter, a NumPy function) on the very pointers the handler packed.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .. import _capi as C
from .._api_version import api_version
from .._dtypes import code_from_dtype
from ._driver import CTX_FN, LAUNCH_FN, NativeDriver

__all__ = [
    "EMULATED_STREAM",
    "EmulatedDevice",
    "EmulatedGPU",
    "EmulatedLaunch",
    "FakeDriver",
    "FakeXLA",
    "Launch",
    "emulate",
    "host_array",
    "register_on_cpu",
]

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


# ------------------------------------------------------------ the emulated GPU

_HANDLER_FN = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_size_t)
#: The stream every emulated call frame carries.
EMULATED_STREAM = 0x5000
_EMULATED_CONTEXT = 77


@dataclasses.dataclass(frozen=True)
class EmulatedDevice:
    """What the launcher reads of a JAX CUDA device."""

    local_hardware_id: int = 0
    id: int = 0


@dataclasses.dataclass
class EmulatedLaunch(Launch):
    """One launch on the emulated GPU, as its kernel's CPU stand-in sees it:
    also the kernel entry and the device ordinal it was loaded for."""

    entry: str = ""
    ordinal: int = 0


def host_array(address: int, dtype: Any, shape: Sequence[int], strides: Any = None) -> np.ndarray:
    """The host memory at ``address`` as an array (empty arrays need none)."""
    dt = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if nbytes == 0:
        return np.empty(shape, dt)
    memory = (ctypes.c_char * nbytes).from_address(address)
    return np.ndarray(shape, dt, buffer=memory, strides=strides)


class EmulatedGPU:
    """A CUDA driver in which kernels run as CPU stand-ins.

    A bridge's test says what each kernel entry does with :meth:`define`
    (its parameters' sizes and a function of the :class:`EmulatedLaunch`);
    loading an image records the entry, and ``cuLaunchKernel`` calls the
    stand-in on the parameters the real handler packed. An exception in a
    stand-in fails the launch (the handler reports it as a driver error) and
    is raised again when :func:`emulate` exits. Use one per process: a
    registered target keeps the handler built against the emulated driver it
    was first lowered with.
    """

    emulated = True

    def __init__(self, compute_capability: tuple[int, int] = (9, 0), devices: int = 1) -> None:
        self.cc = compute_capability
        self.devices: tuple[Any, ...] = tuple(EmulatedDevice(i, i) for i in range(devices))
        self.kernels: dict[str, tuple[tuple[int, ...], Callable[[EmulatedLaunch], None]]] = {}
        self.loaded: list[tuple[int, str, tuple[int, ...], Any]] = []
        #: ``resolve(entry, image) -> (sizes, run)`` for entries not defined
        #: with :meth:`define` (a bridge's stand-in keyed by its image), or None.
        self.resolve: Callable[[str, bytes], Any] | None = None
        self.launches: list[tuple[tuple[int, ...], tuple[int, ...], int, int]] = []
        self.launched_on: list[int] = []
        self.errors: list[BaseException] = []
        #: The launcher's handler cache while this GPU is emulated, apart from
        #: a real GPU's (same keys: a real run must never get these handlers).
        self.handlers: dict[Any, Any] = {}
        self._lock = threading.Lock()
        self.native = NativeDriver(
            launch=LAUNCH_FN(self._launch),
            ctx_get_current=CTX_FN(self._get_current),
            ctx_push=CTX_FN(lambda ctx: 0),
            ctx_pop=CTX_FN(lambda out: 0),
            error_name=lambda code: f"CUDA error {code}",
        )

    def define(
        self, entry: str, sizes: Sequence[int], run: Callable[[EmulatedLaunch], None]
    ) -> None:
        """Kernel ``entry`` takes parameters of ``sizes`` bytes and runs as ``run``."""
        self.kernels[entry] = (tuple(sizes), run)

    def add_stand_ins(self, resolve: Callable[[str, bytes], Any]) -> EmulatedGPU:
        """Try ``resolve(entry, image) -> (sizes, run) or None`` for entries
        not defined with :meth:`define`, before the resolvers added earlier
        (so several bridges' stand-ins share one GPU); returns this GPU."""
        previous = self.resolve

        def chained(entry: str, image: bytes) -> Any:
            found = resolve(entry, image)
            if found is None and previous is not None:
                return previous(entry, image)
            return found

        self.resolve = chained
        return self

    def clear(self) -> None:
        self.launches.clear()
        self.launched_on.clear()
        self.errors.clear()

    # What the launcher asks of the driver.
    def compute_capability(self, ordinal: int) -> tuple[int, int]:
        return self.cc

    def load_function(self, ordinal: int, image: bytes, entry: str, shared_mem: int):
        found = self.kernels.get(entry)
        if found is None and self.resolve is not None:
            found = self.resolve(entry, image)
        if found is None:
            raise KeyError(f"the emulated GPU has no stand-in for kernel entry {entry!r}")
        self.loaded.append((ordinal, entry, *found))
        return _EMULATED_CONTEXT, len(self.loaded)  # CUfunction: 1-based, never 0

    @staticmethod
    def _get_current(out: int) -> int:
        ctypes.c_size_t.from_address(out).value = _EMULATED_CONTEXT
        return 0

    def _launch(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra) -> int:
        try:
            ordinal, entry, sizes, run = self.loaded[f - 1]
            pointers = (ctypes.c_size_t * max(len(sizes), 1)).from_address(params)
            raw = [ctypes.string_at(p, n) for p, n in zip(pointers, sizes, strict=False)]
            if extra != 0:
                raise AssertionError("the launcher passed `extra` to cuLaunchKernel")
            self.launches.append(((gx, gy, gz), (bx, by, bz), shared, stream))
            self.launched_on.append(ordinal)
            launch = EmulatedLaunch(
                f, (gx, gy, gz), (bx, by, bz), shared, stream, raw, entry=entry, ordinal=ordinal
            )
            with self._lock:  # stand-ins may swap module globals: one at a time
                run(launch)
        except BaseException as exc:  # raised again when emulate() exits
            self.errors.append(exc)
            return 1  # CUDA_ERROR_INVALID_VALUE: the handler reports a failed launch
        return 0


def _with_emulated_stream(handler_cfunc: Any) -> tuple[Any, list[Any]]:
    """A CPU FFI handler that calls ``handler_cfunc`` with the call frame's API
    table copied and its stream getter faked (XLA's CPU runtime has no stream;
    the device ordinal is XLA's own, that of the CPU device running the call)."""
    from .._registry import handler_address

    real = _HANDLER_FN(handler_address(handler_cfunc))

    def stream_get(args):
        C.XLA_FFI_Stream_Get_Args.from_address(args).stream = EMULATED_STREAM
        return None

    fake = _API_FN(stream_get)

    def shim(frame_address: int) -> int:
        frame = C.XLA_FFI_CallFrame.from_address(frame_address)
        if frame.extension_start or frame.stage != int(C.ExecutionStage.EXECUTE):
            return real(frame_address)  # the metadata handshake and other stages
        api = C.XLA_FFI_Api.from_buffer_copy(
            ctypes.string_at(frame.api, ctypes.sizeof(C.XLA_FFI_Api))
        )
        api.XLA_FFI_Stream_Get = ctypes.cast(fake, ctypes.c_void_p).value
        copy = C.XLA_FFI_CallFrame.from_buffer_copy(
            ctypes.string_at(frame_address, ctypes.sizeof(C.XLA_FFI_CallFrame))
        )
        copy.api = ctypes.addressof(api)
        return real(ctypes.addressof(copy))

    wrapped = _HANDLER_FN(shim)
    return wrapped, [fake, wrapped]


def register_on_cpu(name: str, handler: Any, *, content: str, platform: str, pin: Any = ()):
    """Register what a bridge registers for CUDA on the CPU instead, behind the
    stream stand-in."""
    from .._registry import register_target

    if platform != "cuda":
        raise AssertionError(f"expected a CUDA target, got platform {platform!r}")
    wrapped, keep = _with_emulated_stream(handler)
    return register_target(
        name, wrapped, content=content, platform="cpu", pin=(handler, *pin, *keep)
    )


@contextlib.contextmanager
def emulate(
    gpu: EmulatedGPU,
    lowerings: Sequence[tuple[Any, Callable[..., Any], Callable[..., Any]]] = (),
) -> Iterator[EmulatedGPU]:
    """Run the launcher's CUDA path on the CPU with ``gpu`` as the driver.

    ``lowerings`` are ``(primitive, cuda_rule, cpu_rule)``: the CUDA lowering
    is registered for the CPU while emulating and ``cpu_rule`` put back after.
    Inside, ``ffi_core.cuda`` sees ``gpu.devices`` as JAX's CUDA devices,
    builds handlers against ``gpu.native`` (kept in ``gpu.handlers``), and
    registers CUDA targets on the CPU; JAX's default device is the CPU.
    Everything up to the driver is real: lowering, the generated handler with
    its checks and packing, the FFI call from XLA.
    """
    import jax
    from jax.interpreters import mlir

    from . import _target

    saved = (_target._jax_cuda_devices, _target._handlers, _target.driver, _target.register_target)
    _target._jax_cuda_devices = lambda: gpu.devices
    _target._handlers = gpu.handlers
    _target.driver = lambda: gpu

    def register(name, handler, *, traits=0, **kwargs):
        if int(traits) != int(C.HandlerTraits.COMMAND_BUFFER_COMPATIBLE):
            raise AssertionError("a launcher handler is registered command-buffer compatible")
        return register_on_cpu(name, handler, **kwargs)

    _target.register_target = register
    for primitive, cuda_rule, _ in lowerings:
        mlir.register_lowering(primitive, cuda_rule, platform="cpu")
    jax.clear_caches()
    gpu.clear()
    try:
        with jax.default_device(jax.devices("cpu")[0]):
            yield gpu
    finally:
        (
            _target._jax_cuda_devices,
            _target._handlers,
            _target.driver,
            _target.register_target,
        ) = saved
        for primitive, _, cpu_rule in lowerings:
            mlir.register_lowering(primitive, cpu_rule, platform="cpu")
        jax.clear_caches()
    if gpu.errors:
        raise gpu.errors[0]
