"""Compile a ``@cuda.jit`` kernel for one signature and describe its parameters.

numba-cuda compiles the kernel to PTX for a compute capability (this works
without a GPU once its compiler libraries are installed); nvJitLink turns the
PTX into a cubin for that architecture, so loading needs no PTX JIT from the
driver. The kernel takes Numba's array ABI: each array argument is flattened
into ``meminfo, parent, nitems, itemsize, data, shape[ndim], strides[ndim]``,
every field 8 bytes, which the native handler packs.

Compiled kernels are cached per process and on disk, in ffi-core's
``ArtifactCache`` (``$NUMBA_CUDA_FFI_CACHE_DIR``; ``""`` for none; else
``numba-cuda-ffi`` under ``ffi_core.cache_root()``), keyed by the kernel's
digest (code, globals, closure values, options), the arrays' dtypes and ranks,
the compute capability and the versions of numba, numba-cuda, the linker and
this package: a second process loads the PTX and cubin without compiling. An
entry is used only when its PTX has one entry taking the parameters the
arrays give, for that architecture, and its image is a cubin or that PTX.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
from ffi_core import KernelCompileError as _KernelCompileError
from ffi_core.bridge import ArraySig
from ffi_core.bridge.cuda import (
    ArtifactCache,
    ArtifactField,
    BadArtifact,
    PtxError,
    ptx_entry,
    ptx_params,
)

from ._runtime import numba_cuda
from ._spec import KernelInfo

__all__ = [
    "ARRAY_FIELDS",
    "CACHE_ENV",
    "CompiledKernel",
    "KernelCompileError",
    "Slot",
    "compile_kernel",
    "param_layout",
]

#: The scalar fields that open Numba's array struct, in order; ``shape`` and
#: ``strides`` (one 8-byte value per axis each) follow.
ARRAY_FIELDS = ("meminfo", "parent", "nitems", "itemsize", "data")


class KernelCompileError(_KernelCompileError):
    """A kernel that numba-cuda cannot compile for the dtypes and ranks it gets
    (a TypeError, as every bridge's ``ffi_core.KernelCompileError``)."""


@dataclasses.dataclass(frozen=True)
class Slot:
    """One 8-byte kernel parameter: a field of array ``array`` (``axis`` for
    ``shape`` and ``strides``)."""

    array: int
    field: str
    axis: int = -1


def param_layout(arrays: tuple[ArraySig, ...]) -> tuple[Slot, ...]:
    """The kernel parameters of ``arrays`` under Numba's array ABI, in order.

    Example:
        >>> [s.field for s in param_layout((ArraySig("float32", 1),))]
        ['meminfo', 'parent', 'nitems', 'itemsize', 'data', 'shape', 'strides']
    """
    slots: list[Slot] = []
    for k, arr in enumerate(arrays):
        slots += [Slot(k, f) for f in ARRAY_FIELDS]
        slots += [Slot(k, "shape", d) for d in range(arr.rank)]
        slots += [Slot(k, "strides", d) for d in range(arr.rank)]
    return tuple(slots)


@dataclasses.dataclass(frozen=True)
class CompiledKernel:
    """A kernel compiled for one signature and compute capability."""

    name: str
    cc: tuple[int, int]
    ptx: str
    entry: str
    image: bytes  # a cubin, or NUL-terminated PTX where no linker is available
    layout: tuple[Slot, ...]


def _numba_type(arr: ArraySig) -> Any:
    import numba

    return numba.types.Array(numba.from_dtype(np.dtype(arr.dtype)), arr.rank, "C")


def _link_cubin(ptx: str, cc: tuple[int, int], options: dict[str, Any]) -> bytes | None:
    """``ptx`` linked into a cubin for ``cc`` with nvJitLink, or None when the
    CUDA Python linker is not installed (the driver then JIT-compiles the PTX)."""
    try:
        from cuda.core import Linker, LinkerOptions, ObjectCode
    except ImportError:
        return None
    link_options = LinkerOptions(
        arch=f"sm_{cc[0]}{cc[1]}",
        max_register_count=options.get("max_registers"),
        lineinfo=bool(options.get("lineinfo")),
    )
    linker = Linker(ObjectCode.from_ptx(ptx.encode()), options=link_options)
    try:
        return bytes(linker.link("cubin").code)
    finally:
        linker.close()


#: The disk cache of compiled kernels (see the README's "Kernel cache").
CACHE_ENV = "NUMBA_CUDA_FFI_CACHE_DIR"

_ELF_MAGIC = b"\x7fELF"

_CACHE = ArtifactCache.for_package(
    "numba-cuda-ffi",
    "numba-cuda kernel",
    env=CACHE_ENV,
    compilers=("numba", "numba-cuda", "cuda-core", "nvidia-nvjitlink"),
    fields={
        "ptx": ArtifactField("str"),
        "entry": ArtifactField("str"),
        "image": ArtifactField("bytes"),
    },
)


@functools.cache
def compile_kernel(
    info: KernelInfo, arrays: tuple[ArraySig, ...], cc: tuple[int, int]
) -> CompiledKernel:
    """Compile ``info``'s kernel for ``arrays`` (the kernel's view: no batch
    axis) and compute capability ``cc``; cached per process, and on disk
    (``$NUMBA_CUDA_FFI_CACHE_DIR``) across processes."""
    layout = param_layout(arrays)
    options = tuple(sorted(info.options.items()))
    key = _CACHE.key(info.digest, arrays, cc, options)

    def decode(values: dict[str, Any]) -> CompiledKernel:
        ptx, entry, image = values["ptx"], values["entry"], values["image"]
        try:
            found = _checked_entry(info.name, ptx, layout, len(arrays))
        except KernelCompileError as exc:
            raise BadArtifact(f"holds PTX that does not fit: {exc}") from None
        if entry != found:
            raise BadArtifact(f"names entry {entry!r}, but its PTX has {found!r}")
        if f".target sm_{cc[0]}{cc[1]}" not in ptx:
            raise BadArtifact(f"holds PTX that is not for sm_{cc[0]}{cc[1]}")
        if not image.startswith(_ELF_MAGIC) and image != ptx.encode() + b"\0":
            raise BadArtifact("holds an image that is neither a cubin nor its PTX")
        return CompiledKernel(info.name, cc, ptx, entry, image, layout)

    def encode(compiled: CompiledKernel) -> dict[str, object]:
        return {"ptx": compiled.ptx, "entry": compiled.entry, "image": compiled.image}

    return _CACHE.fetch(key, lambda: _compile(info, arrays, cc, layout), encode, decode)


def _checked_entry(name: str, ptx: str, layout: tuple[Slot, ...], arrays: int) -> str:
    """The PTX's one entry, whose parameters must be ``layout``'s 8-byte values."""
    try:
        entry = ptx_entry(ptx)
    except PtxError as exc:
        raise KernelCompileError(f"kernel '{name}': {exc}") from None
    sizes = ptx_params(ptx, entry)
    if sizes != (8,) * len(layout):
        raise KernelCompileError(
            f"kernel '{name}' has PTX parameters of sizes {sizes}, not the "
            f"{len(layout)} 8-byte values of Numba's array ABI for "
            f"{arrays} arrays; this "
            "numba-cuda version lays out kernel arguments differently"
        )
    return entry


def _compile(
    info: KernelInfo, arrays: tuple[ArraySig, ...], cc: tuple[int, int], layout: tuple[Slot, ...]
) -> CompiledKernel:
    """numba-cuda's compile to PTX, checked, then linked into a cubin."""
    cuda = numba_cuda()
    from numba.core.errors import NumbaError

    argtypes = tuple(_numba_type(a) for a in arrays)
    opts = info.options
    try:
        ptx, _ = cuda.compile_ptx(
            info.py_func,
            argtypes,
            debug=bool(opts.get("debug")),
            lineinfo=bool(opts.get("lineinfo")),
            fastmath=bool(opts.get("fastmath")),
            opt=opts.get("opt", True) is not False,
            launch_bounds=opts.get("launch_bounds"),
            cc=cc,
        )
    except (NumbaError, TypeError) as exc:
        sig = ", ".join(map(str, arrays))
        raise KernelCompileError(
            f"kernel '{info.name}' does not compile for arrays ({sig}):\n{exc}"
        ) from None
    entry = _checked_entry(info.name, ptx, layout, len(arrays))
    image = _link_cubin(ptx, cc, opts)
    if image is None:
        image = ptx.encode() + b"\0"
    return CompiledKernel(info.name, cc, ptx, entry, image, layout)
