"""Python-side access to an ``XLA_FFI_CallFrame``.

For handlers that run Python by nature (a callable launching several CUDA
kernels, a test double): read buffers, answer the metadata handshake, get the
stream and device ordinal, and create or inspect FFI errors. Native handlers use
the same operations compiled, from :mod:`ffi_core.abi.native`.
"""

from __future__ import annotations

import ctypes
import dataclasses

import numpy as np

from . import _capi as C
from ._api_version import api_version
from ._dtypes import dtype_from_code

__all__ = [
    "BufferView",
    "CallFrame",
    "FFIError",
    "create_error",
    "destroy_error",
    "error_message",
]

_ErrorCreate = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(C.XLA_FFI_Error_Create_Args))
_ErrorGetMessage = ctypes.CFUNCTYPE(None, ctypes.POINTER(C.XLA_FFI_Error_GetMessage_Args))
_ErrorDestroy = ctypes.CFUNCTYPE(None, ctypes.POINTER(C.XLA_FFI_Error_Destroy_Args))
_StreamGet = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(C.XLA_FFI_Stream_Get_Args))
_DeviceOrdinalGet = ctypes.CFUNCTYPE(
    ctypes.c_void_p, ctypes.POINTER(C.XLA_FFI_DeviceOrdinal_Get_Args)
)


class FFIError(RuntimeError):
    """An ``XLA_FFI_Error`` returned by an API function, with its message."""


def _api(api: int) -> C.XLA_FFI_Api:
    return C.XLA_FFI_Api.from_address(api)


def create_error(api: int, message: str, code: int = C.ErrorCode.UNKNOWN) -> int:
    """Create an ``XLA_FFI_Error*`` (returned as an int address) through the API
    table at ``api``. XLA copies the message and takes ownership of the error
    when a handler returns it."""
    args = C.XLA_FFI_Error_Create_Args(
        struct_size=C.struct_size(C.XLA_FFI_Error_Create_Args, "errc"),
        message=message.encode("utf-8", "replace"),
        errc=int(code),
    )
    return _ErrorCreate(_api(api).XLA_FFI_Error_Create)(ctypes.byref(args)) or 0


def error_message(api: int, error: int) -> str:
    """The message of an ``XLA_FFI_Error*``."""
    args = C.XLA_FFI_Error_GetMessage_Args(
        struct_size=C.struct_size(C.XLA_FFI_Error_GetMessage_Args, "message"), error=error
    )
    _ErrorGetMessage(_api(api).XLA_FFI_Error_GetMessage)(ctypes.byref(args))
    return (args.message or b"").decode("utf-8", "replace")


def destroy_error(api: int, error: int) -> None:
    """Free an ``XLA_FFI_Error*`` that will not be returned to XLA."""
    args = C.XLA_FFI_Error_Destroy_Args(
        struct_size=C.struct_size(C.XLA_FFI_Error_Destroy_Args, "error"), error=error
    )
    _ErrorDestroy(_api(api).XLA_FFI_Error_Destroy)(ctypes.byref(args))


def _raise_if_error(api: int, error: int | None, what: str) -> None:
    if error:
        message = error_message(api, error)
        destroy_error(api, error)
        raise FFIError(f"{what} failed: {message}")


@dataclasses.dataclass(frozen=True)
class BufferView:
    """One argument or result buffer of a call frame."""

    dtype_code: int
    data: int
    shape: tuple[int, ...]

    @property
    def dtype(self) -> np.dtype:
        return dtype_from_code(self.dtype_code)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def as_numpy(self) -> np.ndarray:
        """A writable, row-major numpy view of host memory (CPU buffers only)."""
        dtype = self.dtype
        if self.size == 0:
            return np.empty(self.shape, dtype)
        raw = (ctypes.c_char * (self.size * dtype.itemsize)).from_address(self.data)
        # A ctypes array exports the buffer protocol, which its declared type does not say.
        return np.frombuffer(raw, dtype).reshape(self.shape)  # type: ignore[call-overload]


def _buffer(address: int) -> BufferView:
    buf = C.XLA_FFI_Buffer.from_address(address)
    shape = tuple(int(buf.dims[i]) for i in range(buf.rank))
    return BufferView(int(buf.dtype), buf.data or 0, shape)


class CallFrame:
    """A view of the ``XLA_FFI_CallFrame`` at ``address``.

    Example (inside a Python handler)::

        frame = CallFrame(address)
        if frame.is_metadata_query:
            frame.answer_metadata()
            return 0
        x, = frame.args
    """

    def __init__(self, address: int) -> None:
        self.address = address
        self._frame = C.XLA_FFI_CallFrame.from_address(address)

    @property
    def api(self) -> int:
        return self._frame.api or 0

    @property
    def ctx(self) -> int:
        return self._frame.ctx or 0

    @property
    def stage(self) -> C.ExecutionStage:
        return C.ExecutionStage(self._frame.stage)

    @property
    def is_metadata_query(self) -> bool:
        ext = self._frame.extension_start
        return bool(ext) and ext.contents.type == C.ExtensionType.METADATA

    def answer_metadata(self, traits: int = C.HandlerTraits.NONE) -> None:
        """Fill the metadata extension: the API version of the installed jaxlib,
        the handler's traits and no state type."""
        ext = ctypes.cast(
            self._frame.extension_start, ctypes.POINTER(C.XLA_FFI_Metadata_Extension)
        ).contents
        metadata = ext.metadata.contents
        major, minor = api_version()
        metadata.api_version.struct_size = C.struct_size(C.XLA_FFI_Api_Version, "minor_version")
        metadata.api_version.extension_start = None
        metadata.api_version.major_version = major
        metadata.api_version.minor_version = minor
        metadata.traits = int(traits)
        # Only touch state_type_id where the framework's struct has the field.
        if metadata.struct_size >= C.struct_size(C.XLA_FFI_Metadata):
            metadata.state_type_id.type_id = 0

    @property
    def args(self) -> list[BufferView]:
        a = self._frame.args
        return [_buffer(a.args[i]) for i in range(a.size)]

    @property
    def rets(self) -> list[BufferView]:
        r = self._frame.rets
        return [_buffer(r.rets[i]) for i in range(r.size)]

    def stream(self) -> int:
        """The platform stream (a ``CUstream`` on CUDA; 0 on the host)."""
        args = C.XLA_FFI_Stream_Get_Args(
            struct_size=C.struct_size(C.XLA_FFI_Stream_Get_Args, "stream"), ctx=self.ctx
        )
        error = _StreamGet(_api(self.api).XLA_FFI_Stream_Get)(ctypes.byref(args))
        _raise_if_error(self.api, error, "XLA_FFI_Stream_Get")
        return args.stream or 0

    def device_ordinal(self) -> int:
        """The ordinal of the device this call runs on."""
        args = C.XLA_FFI_DeviceOrdinal_Get_Args(
            struct_size=C.struct_size(C.XLA_FFI_DeviceOrdinal_Get_Args, "device_ordinal"),
            ctx=self.ctx,
        )
        error = _DeviceOrdinalGet(_api(self.api).XLA_FFI_DeviceOrdinal_Get)(ctypes.byref(args))
        _raise_if_error(self.api, error, "XLA_FFI_DeviceOrdinal_Get")
        return int(args.device_ordinal)

    def error(self, message: str, code: int = C.ErrorCode.UNKNOWN) -> int:
        """Create an ``XLA_FFI_Error*`` to return from the handler."""
        return create_error(self.api, message, code)
