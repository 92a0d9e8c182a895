"""Compiled Triton kernels kept on disk, so a second process loads the cubin
and its launch metadata instead of compiling.

The cache is ffi-core's ``ArtifactCache``: ``$TRITON_FFI_CACHE_DIR`` (``""``
for none; else ``triton-ffi`` under ``ffi_core.cache_root()``), one file per
compile, keyed by the kernel's digest (its source, the functions it calls,
the globals and defaults it reads), the signature, the constexpr values, the
compute capability, the options, and the versions of Triton, its ``ptxas``
and this package. Triton's own on-disk cache is not used: its location is a
process-wide setting. An entry holds the entry name, the PTX, the cubin and
the launch metadata; the parameter list is not stored but derived from the
signature, and the PTX entry must take exactly those parameters.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ffi_core.bridge.cuda import ArtifactCache, ArtifactField, BadArtifact

from ._compiled import CompiledTriton, TritonCompileError, TritonParam, _check_against_ptx
from ._digest import kernel_digest

__all__ = ["CACHE_ENV", "cached_compile"]

#: The environment variable naming the cache directory ("": no disk cache).
CACHE_ENV = "TRITON_FFI_CACHE_DIR"

_SIZE = ArtifactField("int", 0, 2**31 - 1)
_ALIGN = ArtifactField("int", 1, 2**16)

_CACHE = ArtifactCache.for_package(
    "triton-ffi",
    "Triton kernel",
    env=CACHE_ENV,
    compilers=("triton",),
    fields={
        "entry": ArtifactField("str"),
        "ptx": ArtifactField("str"),
        "cubin": ArtifactField("bytes", prefix=b"\x7fELF"),
        "num_warps": ArtifactField("int", 1, 64),
        "num_stages": ArtifactField("int", 0, 64),
        "shared_mem": _SIZE,
        "num_ctas": ArtifactField("int", 1, 16),
        "global_scratch_size": _SIZE,
        "global_scratch_align": _ALIGN,
        "profile_scratch_size": _SIZE,
        "profile_scratch_align": _ALIGN,
    },
)

#: The launch metadata of an entry, as ``CompiledTriton`` fields.
_METADATA = (
    "num_warps",
    "num_stages",
    "shared_mem",
    "num_ctas",
    "global_scratch_size",
    "global_scratch_align",
    "profile_scratch_size",
    "profile_scratch_align",
)


@functools.cache
def _ptxas(arch: int) -> str:
    """The version of the ``ptxas`` Triton uses for ``arch`` (its backend's hash)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    return str(make_backend(GPUTarget("cuda", arch, 32)).hash())


def cached_compile(
    kernel: Any,
    parts: tuple[object, ...],
    cc: tuple[int, int],
    params: tuple[TritonParam, ...],
    pointer_align: int,
    build: Callable[[], CompiledTriton],
) -> CompiledTriton:
    """``build()``'s result for ``kernel`` compiled with ``parts`` (signature,
    constexprs, options) for ``cc``, from the disk cache when it holds it.

    A kernel whose dependencies Triton cannot name (its digest fails) is not
    cached on disk; ``build`` then reports why it does not compile."""
    try:
        digest = kernel_digest(kernel, kernel.__name__)
    except (TypeError, RuntimeError):
        return build()
    arch = cc[0] * 10 + cc[1]
    key = _CACHE.key(digest, parts, cc, _ptxas(arch))

    def decode(values: dict[str, Any]) -> CompiledTriton:
        if f".target sm_{arch}" not in values["ptx"]:
            raise BadArtifact(f"holds PTX that is not for sm_{arch}")
        compiled = CompiledTriton(
            name=kernel.__name__,
            entry=values["entry"],
            cc=cc,
            ptx=values["ptx"],
            cubin=values["cubin"],
            params=params,
            cluster_dims=(values["num_ctas"], 1, 1),
            pointer_align=pointer_align,
            **{name: values[name] for name in _METADATA},
        )
        try:
            _check_against_ptx(compiled.name, compiled.ptx, compiled.entry, params)
        except TritonCompileError as exc:
            raise BadArtifact(f"holds PTX that does not fit: {exc}") from None
        return compiled

    def encode(compiled: CompiledTriton) -> dict[str, object]:
        values = {name: getattr(compiled, name) for name in _METADATA}
        return {"entry": compiled.entry, "ptx": compiled.ptx, "cubin": compiled.cubin, **values}

    return _CACHE.fetch(key, build, encode, decode)
