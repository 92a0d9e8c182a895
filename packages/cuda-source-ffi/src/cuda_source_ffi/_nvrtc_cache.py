"""The cache of compiled sources: in memory per process, and on disk in
ffi-core's ``ArtifactCache``, one file per compile, trusted only after every
field is checked."""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any

from ffi_core.bridge.cuda import (
    ArtifactCache,
    ArtifactCacheWarning,
    ArtifactField,
    BadArtifact,
    PtxError,
    ptx_entries,
)

from ._compiled import CompiledSource
from ._nvrtc_library import nvrtc_version

__all__ = ["CACHE_ENV", "NvrtcCacheWarning"]

#: The environment variable naming the disk cache's directory ("": none).
CACHE_ENV = "CUDA_SOURCE_FFI_CACHE_DIR"


class NvrtcCacheWarning(ArtifactCacheWarning):
    """A file of the NVRTC disk cache was corrupt or did not hold what its
    name promises; the source was compiled again and the file rewritten."""


_CACHE = ArtifactCache.for_package(
    "cuda-source-ffi",
    "NVRTC compile",
    env=CACHE_ENV,
    what="NVRTC cache",
    fields={
        "name": ArtifactField("str"),
        "ptx": ArtifactField("str"),
        "cubin": ArtifactField("bytes", prefix=b"\x7fELF"),
        "lowered": ArtifactField("strs"),
        "log": ArtifactField("str"),
    },
    warning=NvrtcCacheWarning,
    subject="the source",
)

_memory: dict[str, CompiledSource] = {}
_memory_lock = threading.Lock()


def _clear_memory_cache() -> None:
    """Forget this process's compiled sources (for tests; the disk cache stays)."""
    with _memory_lock:
        _memory.clear()


def _cache_key(compile_args: tuple[Any, ...], header_digest: str) -> str:
    """A digest of everything that decides the compiled output: the arguments
    of the compile (source, name, kernels, arch, options), the headers the
    source reaches and NVRTC's version."""
    source, *settings = compile_args
    source_digest = hashlib.sha256(source.encode()).hexdigest()
    return _CACHE.key(source_digest, *settings, nvrtc_version(), header_digest)


def _fits(kernel: str, lowered: str) -> bool:
    """Whether ``lowered`` can be NVRTC's lowered name of name expression
    ``kernel``: the name itself (``extern "C"``), or a mangled name holding
    the function's identifier (``scale<float>`` -> ``_Z5scaleIfEvPT_S0_i``)."""
    if lowered == kernel:
        return True
    base = re.split(r"[<(]", kernel, maxsplit=1)[0].split("::")[-1].strip()
    if not base.isidentifier():
        return lowered.startswith("_Z")  # an expression this check cannot read
    return lowered.startswith("_Z") and f"{len(base)}{base}" in lowered


def _encode(compiled: CompiledSource, kernels: tuple[str, ...]) -> dict[str, object]:
    lowered = tuple(compiled.entries[k] for k in kernels)
    return {
        "name": compiled.name,
        "ptx": compiled.ptx,
        "cubin": compiled.cubin,
        "lowered": lowered,
        "log": compiled.log,
    }


def _decode(
    values: dict[str, Any], kernels: tuple[str, ...], arch: tuple[int, int]
) -> CompiledSource:
    """The entry's values as a compile of ``kernels`` for ``arch``, or a :class:`BadArtifact`."""
    ptx, lowered = values["ptx"], values["lowered"]
    if f".target sm_{arch[0]}{arch[1]}" not in ptx:
        raise BadArtifact(f"holds PTX that is not for sm_{arch[0]}{arch[1]}")
    if len(lowered) != len(kernels):
        raise BadArtifact(
            f"holds {len(lowered)} lowered names, not one for each of {list(kernels)}"
        )
    try:
        in_ptx = set(ptx_entries(ptx))
    except PtxError:
        raise BadArtifact("holds PTX that cannot be read") from None
    for kernel, name in zip(kernels, lowered, strict=True):
        if name not in in_ptx or not _fits(kernel, name):
            raise BadArtifact(
                f"names {name!r} as the entry of kernel {kernel!r}, which is not a "
                "matching .entry of its PTX"
            )
    entries = dict(zip(kernels, lowered, strict=True))
    return CompiledSource(values["name"], arch, ptx, values["cubin"], entries, values["log"])
