"""CUDA C++ source compiled to PTX and cubin with NVRTC, for an explicit architecture.

NVRTC (CUDA's runtime compiler library) is called through ``ctypes``, so no CUDA
driver or GPU is needed here: compiling is separate from launching, which the
native launcher does later from the cubin (or the PTX) and the lowered entry
names this module records.

Each kernel the caller names is registered as an NVRTC *name expression*, so an
``extern "C"`` kernel (``"axpy"``) and a C++ one, template instantiations
included (``"scale<float>"``), are both found and instantiated, and their
mangled PTX entry names are read back.

Results are cached per process and on disk in ffi-core's ``ArtifactCache``
(``$CUDA_SOURCE_FFI_CACHE_DIR``; ``""`` for none; else ``cuda-source-ffi``
under ``ffi_core.cache_root()``, checked by ``ffi_core.checked_cache_dir``),
keyed by everything that decides the output:
the source, its name, the kernels, the architecture, the options, the NVRTC
version and the content of every header file its ``#include`` lines reach.
A second process skips the compile. Only sources that include no file from
disk are cached on disk; the others in memory only. An entry read from disk is
trusted only after its format, checksum, kind, key, every field's type, its
architecture and its lowered names (each a ``.entry`` of its PTX, and one per
kernel asked for) are checked; anything else is a miss: the source is
compiled again, the file rewritten, and an :class:`NvrtcCacheWarning` names it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ffi_core.bridge.cuda import ptx_entries, ptx_params

from ._compiled import CompiledSource, NvrtcCompileError
from ._headers import headers, include_dirs_of
from ._nvrtc_cache import (
    _CACHE,
    NvrtcCacheWarning,
    _cache_key,
    _decode,
    _encode,
    _memory,
    _memory_lock,
)
from ._nvrtc_cache import _clear_memory_cache as _clear_memory_cache
from ._nvrtc_library import _library as _library
from ._nvrtc_library import _run_nvrtc, _supported_archs, nvrtc_version

__all__ = [
    "CompiledSource",
    "NvrtcCacheWarning",
    "NvrtcCompileError",
    "compile_source",
    "entry_params",
    "nvrtc_version",
]

# ``_clear_memory_cache`` and ``_library`` are imported by name for the tests, which reach the cache and the library through this module.

#: ``Input name expression was: " scale<float>"`` -- how NVRTC reports a name
#: expression that names no ``__global__`` function of the source.
_BAD_NAME = re.compile(r'Input name expression was: "\s*(.*?)\s*"')

#: Options that ``arch`` and the compile itself own.
_RESERVED_OPTIONS = ("-arch", "--gpu-architecture")


def _missing_kernels(log: str, kernels: Sequence[str]) -> list[str]:
    """The kernels a failed compile's log reports as unknown name expressions.

    NVRTC quotes an expression re-spaced (``other<int>`` as ``other < int >``),
    so names are compared without whitespace and given back as the caller spelt them.
    """
    reported = {re.sub(r"\s+", "", n) for n in _BAD_NAME.findall(log)} - {""}
    return [k for k in kernels if re.sub(r"\s+", "", k) in reported]


def _compile(
    source: str,
    name: str,
    kernels: tuple[str, ...],
    arch: tuple[int, int],
    options: tuple[str, ...],
) -> CompiledSource:
    """Compile with NVRTC (no cache): cubin from ``sm_XY``, PTX from the same
    compile where NVRTC gives it, else from a second one for ``compute_XY``."""
    sm = f"sm_{arch[0]}{arch[1]}"
    where = f"{name!r} for {sm}"
    encoded = source.encode()
    result = _run_nvrtc(encoded, name, kernels, (f"--gpu-architecture={sm}", *options))
    if not result.ok:
        missing = _missing_kernels(result.log, kernels)
        if missing:
            raise NvrtcCompileError(
                f"NVRTC found no __global__ kernel named {missing} in {where}; each of "
                "`kernels` must name a __global__ function or a template instantiation "
                "of one, e.g. 'axpy' or 'scale<float>'",
                result.log,
            )
        raise NvrtcCompileError(f"NVRTC could not compile {where}", result.log)
    if not result.cubin:
        raise NvrtcCompileError(
            f"NVRTC made no cubin for {where}; options such as -dlto give LTO IR instead",
            result.log,
        )
    ptx = result.ptx
    if not ptx:  # NVRTC versions that give PTX only for a virtual architecture
        virtual = f"--gpu-architecture=compute_{arch[0]}{arch[1]}"
        again = _run_nvrtc(encoded, name, kernels, (virtual, *options))
        if not again.ok or not again.ptx:
            raise NvrtcCompileError(f"NVRTC made no PTX for {where}", again.log)
        ptx = again.ptx
    entries = set(ptx_entries(ptx))
    absent = {k: v for k, v in result.lowered.items() if v not in entries}
    if absent:
        raise NvrtcCompileError(
            f"the PTX of {where} has no .entry for {absent} (kernel -> lowered name)", result.log
        )
    return CompiledSource(name, arch, ptx, result.cubin, dict(result.lowered), result.log)


def _strings(value: object, argument: str) -> tuple[str, ...]:
    """``value`` as a tuple of str, or a TypeError naming ``argument``."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(
            f"{argument} must be a sequence of str (a list or tuple), got {type(value).__name__}"
        )
    bad = [v for v in value if not isinstance(v, str)]
    if bad:
        raise TypeError(f"{argument} must contain only str, got {bad[0]!r}")
    return tuple(value)


def _validate_arch(arch: object) -> tuple[int, int]:
    """``arch`` checked: a tuple of two ints, ``>= (5, 0)``, with a one-digit minor."""
    if (
        not isinstance(arch, tuple)
        or len(arch) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in arch)
    ):
        raise TypeError(f"arch must be a tuple of two ints such as (9, 0), got {arch!r}")
    if arch < (5, 0) or not 0 <= arch[1] <= 9:
        raise ValueError(
            f"arch must be a compute capability (major, minor) >= (5, 0) with minor 0-9, got {arch!r}"
        )
    return arch


def compile_source(
    source: str,
    *,
    name: str,
    kernels: Sequence[str],
    arch: tuple[int, int],
    options: Sequence[str] = (),
    include_dirs: Sequence[str | os.PathLike[str]] = (),
) -> CompiledSource:
    """Compile CUDA C++ ``source`` for ``arch`` into PTX and cubin with NVRTC.

    Args:
        source: the CUDA C++ text.
        name: its name, used by NVRTC's log (``name(line): error: ...``).
        kernels: the ``__global__`` functions to keep, as C++ name expressions:
            ``"axpy"`` for ``extern "C"`` kernels, ``"ns::f"`` or
            ``"scale<float>"`` for C++ ones (templates are instantiated).
        arch: the compute capability, e.g. ``(9, 0)`` for ``sm_90``.
        options: more NVRTC options; ``-std=c++17`` and ``-default-device`` are
            added unless a ``-std`` / ``-default-device`` option is given.
        include_dirs: directories searched by ``#include``. The content of
            every header the source's ``#include`` lines reach (there, in the
            working directory, or beside the including header) is in the cache
            key; a compile that reads any header from disk is cached in memory
            only.

    Returns:
        The PTX, the cubin, and each kernel's PTX entry name.

    Raises:
        TypeError / ValueError: an argument of the wrong type or value.
        NvrtcCompileError: NVRTC rejected the source, or a kernel was not found.
        ImportError: NVRTC is not installed.
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be a str of CUDA C++, got {type(source).__name__}")
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    names = tuple(dict.fromkeys(_strings(kernels, "kernels")))
    if not names or not all(k.strip() for k in names):
        raise ValueError("kernels must name at least one kernel, and no name may be blank")
    arch = _validate_arch(arch)
    opts = _strings(options, "options")
    reserved = [o for o in opts if re.split(r"[=\s]", o)[0] in _RESERVED_OPTIONS]
    if reserved:
        raise ValueError(f"options must not set the architecture ({reserved}); pass arch instead")
    if isinstance(include_dirs, str | bytes) or not isinstance(include_dirs, Sequence):
        raise TypeError("include_dirs must be a sequence of directory paths (str or PathLike)")
    dirs = tuple(os.path.abspath(os.fspath(d)) for d in include_dirs)
    if not any(o.startswith(("-std", "--std")) for o in opts):
        opts = ("-std=c++17", *opts)
    if not any(o.lstrip("-") == "default-device" for o in opts):
        opts = ("-default-device", *opts)
    opts = (*opts, *(f"--include-path={d}" for d in dirs))

    if arch not in _supported_archs():
        supported = ", ".join(f"{a}" for a in _supported_archs())
        raise ValueError(
            f"arch {arch!r} is not supported by NVRTC {'.'.join(map(str, nvrtc_version()))}; "
            f"it supports {supported}"
        )

    searched = include_dirs_of(opts)
    found = headers(source, searched)
    compile_args = (source, name, names, arch, opts)
    key = _cache_key(compile_args, found.digest)
    with _memory_lock:
        hit = _memory.get(key)
    if hit is not None:
        return hit
    if searched or found.from_disk:
        compiled = _compile(*compile_args)
    else:
        compiled = _CACHE.fetch(
            key,
            lambda: _compile(*compile_args),
            lambda built: _encode(built, names),
            lambda values: _decode(values, names, arch),
        )
    with _memory_lock:
        return _memory.setdefault(key, compiled)


def entry_params(compiled: CompiledSource, kernel: str) -> tuple[int, ...]:
    """The byte size of each parameter of ``kernel`` (a name given to
    :func:`compile_source`), read from its PTX ``.entry``."""
    if kernel not in compiled.entries:
        raise ValueError(
            f"kernel {kernel!r} was not compiled in {compiled.name!r}; "
            f"it has {list(compiled.entries)}"
        )
    return ptx_params(compiled.ptx, compiled.entries[kernel])
