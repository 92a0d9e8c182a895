"""What compiling a Triton kernel gives: the entry, its parameters and the
launch metadata, checked against the PTX."""

from __future__ import annotations

import dataclasses

from ffi_core import KernelCompileError
from ffi_core.bridge.cuda import PtxError, ptx_entries, ptx_params

__all__ = ["SCRATCH_PARAMS", "CompiledTriton", "TritonCompileError", "TritonParam"]

#: The parameters Triton 3.x appends to every entry, in order (both pointers).
SCRATCH_PARAMS = ("global_scratch", "profile_scratch")

_POINTER_SIZE = 8
_POINTER_ALIGN = 16


class TritonCompileError(KernelCompileError):
    """A kernel that Triton cannot compile, or whose compiled entry does not
    take the parameters its signature declares (a TypeError, as every
    bridge's ``ffi_core.KernelCompileError``)."""


@dataclasses.dataclass(frozen=True)
class TritonParam:
    """One parameter of the compiled CUDA entry.

    ``kind`` is ``"pointer"``, ``"scalar"`` or ``"scratch"`` (appended by
    Triton); ``dtype`` is the numpy dtype name of the pointee or scalar (empty
    for scratch); ``size`` its byte size in the launch; ``index`` its position
    among the kernel's Python parameters (-1 for scratch).
    """

    name: str
    kind: str
    dtype: str
    size: int
    index: int


@dataclasses.dataclass(frozen=True)
class CompiledTriton:
    """A kernel compiled for one target, with what a launcher needs.

    ``name`` is the Python kernel's name and ``entry`` the PTX/cubin function
    to look up. ``num_warps`` is the compiled value (Triton may change the
    requested one, e.g. for warp specialization), so the block is
    :attr:`block`. Scratch sizes are per program (per CTA).
    """

    name: str
    entry: str
    cc: tuple[int, int]
    ptx: str
    cubin: bytes
    num_warps: int
    num_stages: int
    shared_mem: int
    params: tuple[TritonParam, ...]
    num_ctas: int = 1
    cluster_dims: tuple[int, int, int] = (1, 1, 1)
    global_scratch_size: int = 0
    global_scratch_align: int = 1
    profile_scratch_size: int = 0
    profile_scratch_align: int = 1
    pointer_align: int = _POINTER_ALIGN

    @property
    def block(self) -> tuple[int, int, int]:
        """The thread block every launch must use (the PTX requires it exactly)."""
        return (32 * self.num_warps, 1, 1)

    @property
    def param_sizes(self) -> tuple[int, ...]:
        """The byte size of each entry parameter, in order."""
        return tuple(p.size for p in self.params)


def _check_against_ptx(kernel: str, ptx: str, entry: str, params: tuple[TritonParam, ...]) -> None:
    """Raise TritonCompileError unless the PTX ``entry`` exists and takes
    exactly ``params`` (same count, same byte sizes, same order)."""
    if entry not in ptx_entries(ptx):
        raise TritonCompileError(
            f"kernel {kernel!r}: the PTX has no entry {entry!r}; it has {list(ptx_entries(ptx))}"
        )
    try:
        sizes = ptx_params(ptx, entry)
    except PtxError as exc:
        raise TritonCompileError(f"kernel {kernel!r}: {exc}") from exc
    declared = tuple(p.size for p in params)
    if sizes != declared:
        layout = [(p.name, p.size) for p in params]
        raise TritonCompileError(
            f"kernel {kernel!r}: PTX entry {entry!r} takes parameters of {list(sizes)} bytes, "
            f"but the declared layout is {layout}"
        )
