"""The emulated GPU: ``ffi_core.bridge.cuda``'s CUDA path run on the CPU, with each
kernel launch handed to a CPU stand-in of the kernel."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ....abi import capi as C
from .._driver import CTX_FN, LAUNCH_FN, NativeDriver
from ._fakes import _API_FN, Launch

__all__ = [
    "EMULATED_STREAM",
    "EmulatedDevice",
    "EmulatedGPU",
    "EmulatedLaunch",
    "emulate",
    "emulated_gpu_fixture",
    "register_on_cpu",
]

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
    from ...._registry import handler_address

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
    from ...._registry import register_target

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
    Inside, ``ffi_core.bridge.cuda`` sees ``gpu.devices`` as JAX's CUDA devices,
    builds handlers against ``gpu.native`` (kept in ``gpu.handlers``), and
    registers CUDA targets on the CPU; JAX's default device is the CPU.
    Everything up to the driver is real: lowering, the generated handler with
    its checks and packing, the FFI call from XLA.
    """
    import jax
    from jax.interpreters import mlir

    from .. import _target

    saved = (_target._jax_cuda_devices, _target._handlers, _target.driver, _target.register_target)
    # The launcher's cached look-ups, swapped for the emulated GPU's until exit.
    _target._jax_cuda_devices = lambda: gpu.devices  # type: ignore[assignment]
    _target._handlers = gpu.handlers
    _target.driver = lambda: gpu  # type: ignore[assignment]

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


def emulated_gpu_fixture(
    gpu: EmulatedGPU | None = None,
    lowerings: Sequence[tuple[Any, Callable[..., Any], Callable[..., Any]]] = (),
    *,
    name: str = "gpu",
    **gpu_options: Any,
) -> Any:
    """A pytest fixture that runs its test inside ``emulate(gpu, lowerings)``
    and gives the test the GPU.

    Without ``gpu``, each test gets a fresh :class:`EmulatedGPU`
    (``gpu_options`` go to it): enough for tests that only trace. Tests that
    lower and run kernels share one ``gpu`` per process (a registered target
    keeps the handler built against the driver it was first lowered with).
    Assign it to a name in a test module or ``conftest.py``::

        from ffi_core.bridge.cuda.testing import EmulatedGPU, emulated_gpu_fixture

        gpu = emulated_gpu_fixture(EmulatedGPU(), [LOWERING])

    Args:
        gpu: the GPU every test shares, or None for a fresh one per test.
        lowerings: as for :func:`emulate`.
        name: the fixture's name.
        gpu_options: :class:`EmulatedGPU`'s options (``compute_capability``,
            ``devices``) for a fresh one per test.

    Raises:
        ValueError: both ``gpu`` and ``gpu_options`` are given.
    """
    import pytest  # a test dependency: imported only when a test asks for it

    if gpu is not None and gpu_options:
        raise ValueError(
            f"pass `gpu` or EmulatedGPU's options {sorted(gpu_options)}, not both: "
            "the options are for a fresh GPU per test"
        )

    def emulated_gpu() -> Iterator[EmulatedGPU]:
        with emulate(gpu if gpu is not None else EmulatedGPU(**gpu_options), lowerings) as used:
            yield used

    return pytest.fixture(name=name)(emulated_gpu)
