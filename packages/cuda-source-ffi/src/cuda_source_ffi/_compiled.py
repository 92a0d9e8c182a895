"""What compiling a source gives: its result, or NVRTC's error."""

from __future__ import annotations

import dataclasses

from ffi_core import KernelCompileError

__all__ = ["CompiledSource", "NvrtcCompileError"]


class NvrtcCompileError(KernelCompileError, RuntimeError):
    """NVRTC rejected a source: the message names the source and architecture,
    then gives NVRTC's log, which is also kept as ``log`` (``file(line): error: ...``).

    An ``ffi_core.KernelCompileError`` (so a TypeError), as every bridge's
    compile error, and a RuntimeError."""

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(f"{message}:\n{log}" if log else message)
        self.log = log


@dataclasses.dataclass(frozen=True)
class CompiledSource:
    """One source compiled for one architecture.

    Attributes:
        name: the source's name, as NVRTC's log quotes it.
        arch: the compute capability compiled for, e.g. ``(9, 0)``.
        ptx: the PTX text (``.target sm_XY``).
        cubin: the ELF cubin for ``sm_XY``.
        entries: each kernel name the caller asked for -> its PTX ``.entry``
            name (the mangled name for C++ kernels). Shared by cached results:
            read it, do not change it.
        log: NVRTC's log of the compile (warnings; empty when there are none).
    """

    name: str
    arch: tuple[int, int]
    ptx: str
    cubin: bytes
    entries: dict[str, str] = dataclasses.field(hash=False)
    log: str
