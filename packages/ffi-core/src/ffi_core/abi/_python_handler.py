"""FFI handlers written in Python.

For work that needs Python by nature (a callable that launches several CUDA
kernels and allocates temporaries). Such a handler takes the GIL on each call;
kernels that can be compiled get native handlers instead (numba-cpu-ffi,
numba-cuda-ffi).
"""

from __future__ import annotations

import ctypes
import traceback
from collections.abc import Callable

from ._capi import ErrorCode, HandlerTraits
from ._frame import CallFrame, create_error

__all__ = ["HANDLER_CFUNCTYPE", "python_handler"]

#: ``XLA_FFI_Error* (*)(XLA_FFI_CallFrame*)`` as a ctypes function type.
HANDLER_CFUNCTYPE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


def python_handler(
    fn: Callable[[CallFrame], None],
    *,
    name: str,
    traits: HandlerTraits = HandlerTraits.NONE,
) -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    """Wrap ``fn(frame)`` as an FFI handler.

    The wrapper answers the metadata handshake itself, calls ``fn`` with a
    :class:`CallFrame` for the execute stage, and turns any exception into an
    ``XLA_FFI_Error`` whose message names ``name`` and carries the exception,
    so the caller of the JAX function gets it as a Python exception.

    Register the result with :func:`ffi_core.bridge.register_target`, which pins it.
    """

    def handler(address: int) -> int:
        frame = CallFrame(address)
        try:
            if frame.is_metadata_query:
                frame.answer_metadata(traits)
                return 0
            fn(frame)
            return 0
        except BaseException as exc:  # every failure must reach the caller
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            return create_error(frame.api, f"{name} failed: {detail}", ErrorCode.UNKNOWN)

    return HANDLER_CFUNCTYPE(handler)
