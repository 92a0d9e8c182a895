"""CUDA C++ source compiled to PTX and cubin with NVRTC, for an explicit architecture.

NVRTC (CUDA's runtime compiler library) is called through ``ctypes``, so no CUDA
driver or GPU is needed here: compiling is separate from launching, which the
native launcher does later from the cubin (or the PTX) and the lowered entry
names this module records.

Each kernel the caller names is registered as an NVRTC *name expression*, so an
``extern "C"`` kernel (``"axpy"``) and a C++ one, template instantiations
included (``"scale<float>"``), are both found and instantiated, and their
mangled PTX entry names are read back.

Results are cached per process and on disk (``$CUDA_SOURCE_FFI_CACHE_DIR``, else
``cuda-source-ffi`` under ``ffi_core.cache_root()``, both checked by
``ffi_core.checked_cache_dir``), keyed by everything that decides the output:
the source, its name, the kernels, the architecture, the options, the NVRTC
version and the content of every header file its ``#include`` lines reach.
A second process skips the compile. Only sources that include no file from
disk are cached on disk; the others in memory only. An entry read from disk is
trusted only after its format, checksum, every field's type, its key, its
architecture and its lowered names (each a ``.entry`` of its PTX, and one per
kernel asked for) are checked; anything else is a miss: the source is
compiled again, the file rewritten, and an :class:`NvrtcCacheWarning` names it.
"""

from __future__ import annotations

import base64
import ctypes
import ctypes.util
import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import re
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ffi_core import KernelCompileError, cache_root, checked_cache_dir
from ffi_core.cuda import PtxError, ptx_entries, ptx_params

__all__ = [
    "CompiledSource",
    "NvrtcCacheWarning",
    "NvrtcCompileError",
    "compile_source",
    "entry_params",
    "nvrtc_version",
]

_INSTALL_HINT = (
    'install it with `uv add "cuda-source-ffi[cu13]"` (CUDA 13) '
    'or `uv add "cuda-source-ffi[cu12]"` (CUDA 12)'
)

#: NVRTC from NVIDIA's wheels, relative to a directory of the ``nvidia`` namespace package.
_WHEEL_LIBS = ("cu13/lib/libnvrtc.so.13", "cuda_nvrtc/lib/libnvrtc.so.12")

_SUCCESS = 0
_COMPILATION = 6

#: Bumped whenever the on-disk entry's layout or meaning changes.
_CACHE_FORMAT = 2

#: The fields of an on-disk entry's payload and their JSON types.
_ENTRY_FIELDS: dict[str, type] = {
    "key": str,
    "name": str,
    "arch": list,
    "ptx": str,
    "cubin": str,
    "entries": dict,
    "log": str,
}

_ELF_MAGIC = b"\x7fELF"

#: ``#include "x.h"``, ``#include <x.h>`` or ``#include MACRO``: what follows ``include``.
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\b[ \t]*(.*?)[ \t]*(?://.*)?$", re.MULTILINE)

#: ``--include-path=dir`` or ``-Idir``: an NVRTC option naming an include directory.
_INCLUDE_OPTION = re.compile(r"^(?:--include-path=|-I=?)(.+)$")

#: ``Input name expression was: " scale<float>"`` -- how NVRTC reports a name
#: expression that names no ``__global__`` function of the source.
_BAD_NAME = re.compile(r'Input name expression was: "\s*(.*?)\s*"')

#: Options that ``arch`` and the compile itself own.
_RESERVED_OPTIONS = ("-arch", "--gpu-architecture")


class NvrtcCacheWarning(UserWarning):
    """A file of the NVRTC disk cache was corrupt or did not hold what its
    name promises; the source was compiled again and the file rewritten."""


class NvrtcCompileError(KernelCompileError, RuntimeError):
    """NVRTC rejected a source: the message names the source and architecture,
    then gives NVRTC's log, which is also kept as ``log`` (``file(line): error: ...``).

    An ``ffi_core.KernelCompileError`` (so a TypeError), as every bridge's
    compile error, and still a RuntimeError, as before."""

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


# --------------------------------------------------------------------------- library


def _candidate_paths() -> list[str]:
    """Where NVRTC may be, best first: cuda.pathfinder, NVIDIA's wheels, the system."""
    paths: list[str] = []
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
    except ImportError:
        pass
    else:
        try:
            paths.append(load_nvidia_dynamic_lib("nvrtc").abs_path)
        except Exception:  # not found, or unsupported here: try the others
            pass
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        paths.extend(str(Path(root, lib)) for lib in _WHEEL_LIBS if Path(root, lib).is_file())
    system = ctypes.util.find_library("nvrtc")
    paths.extend(p for p in (system, "libnvrtc.so") if p)
    return paths


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    """Give each NVRTC function used here its C signature."""
    p, i, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    pp, cp = ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p
    signatures = {
        "nvrtcVersion": (ctypes.POINTER(i), ctypes.POINTER(i)),
        "nvrtcGetNumSupportedArchs": (ctypes.POINTER(i),),
        "nvrtcGetSupportedArchs": (ctypes.POINTER(i),),
        "nvrtcCreateProgram": (pp, cp, cp, i, ctypes.POINTER(cp), ctypes.POINTER(cp)),
        "nvrtcDestroyProgram": (pp,),
        "nvrtcAddNameExpression": (p, cp),
        "nvrtcCompileProgram": (p, i, ctypes.POINTER(cp)),
        "nvrtcGetProgramLogSize": (p, ctypes.POINTER(sz)),
        "nvrtcGetProgramLog": (p, ctypes.c_char_p),
        "nvrtcGetPTXSize": (p, ctypes.POINTER(sz)),
        "nvrtcGetPTX": (p, ctypes.c_char_p),
        "nvrtcGetCUBINSize": (p, ctypes.POINTER(sz)),
        "nvrtcGetCUBIN": (p, ctypes.c_char_p),
        "nvrtcGetLoweredName": (p, cp, ctypes.POINTER(cp)),
    }
    for fname, argtypes in signatures.items():
        fn = getattr(lib, fname)
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
    lib.nvrtcGetErrorString.argtypes, lib.nvrtcGetErrorString.restype = (i,), cp
    return lib


@functools.cache
def _library() -> ctypes.CDLL:
    """The NVRTC library, loaded once (failures are not cached: a later install is seen).

    No environment variable is set and no ``ctypes`` default is changed: the
    library is opened by its full path where one is known (cuda.pathfinder,
    when installed, does its own loading and caching of that library).
    """
    tried: list[str] = []
    for path in _candidate_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
            continue
        if hasattr(lib, "nvrtcGetSupportedArchs"):
            return _declare(lib)
        tried.append(f"{path}: no nvrtcGetSupportedArchs (NVRTC older than 11.2)")
    detail = "; ".join(tried) or "no candidate found"
    raise ImportError(
        "cuda-source-ffi needs NVRTC, the CUDA C++ compiler library, and could not "
        f"load it ({detail}); {_INSTALL_HINT}"
    )


def _check(status: int, what: str) -> None:
    """Raise for an NVRTC status other than success (API misuse, out of memory)."""
    if status != _SUCCESS:
        text = _library().nvrtcGetErrorString(status).decode()
        raise RuntimeError(f"{what} failed: {text} ({status})")


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    """The loaded NVRTC's ``(major, minor)`` version, e.g. ``(13, 0)``."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(_library().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


@functools.cache
def _supported_archs() -> tuple[tuple[int, int], ...]:
    """The ``sm_XY`` architectures the loaded NVRTC can target, as ``(X, Y)``."""
    lib = _library()
    count = ctypes.c_int()
    _check(lib.nvrtcGetNumSupportedArchs(ctypes.byref(count)), "nvrtcGetNumSupportedArchs")
    values = (ctypes.c_int * count.value)()
    _check(lib.nvrtcGetSupportedArchs(values), "nvrtcGetSupportedArchs")
    return tuple(divmod(v, 10) for v in values)


# --------------------------------------------------------------------------- compiling


@dataclasses.dataclass
class _Output:
    """What one NVRTC compile produced."""

    ok: bool
    log: str
    ptx: str = ""
    cubin: bytes = b""
    lowered: dict[str, str] = dataclasses.field(default_factory=dict)


def _read(program: ctypes.c_void_p, size_fn: str, get_fn: str) -> bytes | None:
    """A program's log, PTX or cubin; None where NVRTC has none to give."""
    lib = _library()
    size = ctypes.c_size_t()
    if getattr(lib, size_fn)(program, ctypes.byref(size)) != _SUCCESS or size.value == 0:
        return None
    buffer = ctypes.create_string_buffer(size.value)
    if getattr(lib, get_fn)(program, buffer) != _SUCCESS:
        return None
    return buffer.raw


def _run_nvrtc(source: bytes, name: str, kernels: Sequence[str], options: Sequence[str]) -> _Output:
    """Compile once; read the log, PTX, cubin and lowered names before the program
    is destroyed (the lowered names point into it)."""
    lib = _library()
    program = ctypes.c_void_p()
    _check(
        lib.nvrtcCreateProgram(ctypes.byref(program), source, name.encode(), 0, None, None),
        "nvrtcCreateProgram",
    )
    try:
        for kernel in kernels:
            _check(lib.nvrtcAddNameExpression(program, kernel.encode()), "nvrtcAddNameExpression")
        argv = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
        status = lib.nvrtcCompileProgram(program, len(options), argv)
        raw_log = _read(program, "nvrtcGetProgramLogSize", "nvrtcGetProgramLog") or b""
        log = raw_log.rstrip(b"\0").decode(errors="replace").strip()
        if status != _SUCCESS:
            if status != _COMPILATION and not log:
                log = lib.nvrtcGetErrorString(status).decode()
            return _Output(ok=False, log=log)
        ptx = _read(program, "nvrtcGetPTXSize", "nvrtcGetPTX") or b""
        cubin = _read(program, "nvrtcGetCUBINSize", "nvrtcGetCUBIN") or b""
        lowered: dict[str, str] = {}
        for kernel in kernels:
            out = ctypes.c_char_p()
            _check(
                lib.nvrtcGetLoweredName(program, kernel.encode(), ctypes.byref(out)),
                f"nvrtcGetLoweredName({kernel!r})",
            )
            lowered[kernel] = (out.value or b"").decode()
        return _Output(True, log, ptx.rstrip(b"\0").decode(), cubin, lowered)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


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


# --------------------------------------------------------------------------- caching

_memory: dict[str, CompiledSource] = {}
_memory_lock = threading.Lock()


def _clear_memory_cache() -> None:
    """Forget this process's compiled sources (for tests; the disk cache stays)."""
    with _memory_lock:
        _memory.clear()


def _cache_dir() -> Path | None:
    """``$CUDA_SOURCE_FFI_CACHE_DIR`` if set (only read here), else
    ``cuda-source-ffi`` under ``ffi_core.cache_root()``; None (no disk cache,
    with a ``CacheDirWarning``) where ``ffi_core.checked_cache_dir`` refuses it."""
    configured = os.environ.get("CUDA_SOURCE_FFI_CACHE_DIR")
    path = Path(configured) if configured else cache_root() / "cuda-source-ffi"
    return checked_cache_dir(path, purpose="cuda-source-ffi's NVRTC cache")


def include_dirs_of(options: Sequence[str]) -> tuple[str, ...]:
    """The include directories that NVRTC ``options`` name (``-Idir``,
    ``--include-path=dir``), in order."""
    found = (_INCLUDE_OPTION.match(o) for o in options)
    return tuple(m.group(1).strip() for m in found if m and m.group(1).strip())


@dataclasses.dataclass(frozen=True)
class Headers:
    """What a source's ``#include`` lines reach on disk.

    ``digest`` covers each header file found (its include spelling, path and
    content), recursively through the headers it includes, searched where
    NVRTC may look: the including file's directory, the working directory and
    the include directories. ``from_disk`` is True when any header was read
    from disk, or an ``#include`` names its file through a macro (which this
    scan cannot follow): such a compile is cached in memory only.
    """

    digest: str
    from_disk: bool


def headers(source: str, include_dirs: Sequence[str] = ()) -> Headers:
    """The :class:`Headers` of ``source`` compiled with ``include_dirs``."""
    h = hashlib.sha256()
    from_disk = False
    seen: set[str] = set()
    pending: list[tuple[str, str | None]] = [(source, None)]
    while pending:
        text, here = pending.pop()
        for spec in _INCLUDE.findall(text):
            if len(spec) < 2 or (spec[0], spec[-1]) not in (('"', '"'), ("<", ">")):
                h.update(f"unread include {spec}\n".encode())
                from_disk = True
                continue
            roots = [*([here] if here else []), os.getcwd(), *include_dirs]
            for root in dict.fromkeys(roots):
                path = os.path.join(root, spec[1:-1])
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:  # absent, a directory, unreadable: not what NVRTC includes
                    continue
                from_disk = True
                h.update(f"{spec} {path} ".encode() + hashlib.sha256(data).digest())
                if path not in seen:
                    seen.add(path)
                    pending.append((data.decode(errors="replace"), os.path.dirname(path)))
    return Headers(h.hexdigest(), from_disk)


def _cache_key(
    source: str,
    name: str,
    kernels: tuple[str, ...],
    arch: tuple[int, int],
    options: tuple[str, ...],
    header_digest: str = "",
) -> str:
    """A digest of everything that decides the compiled output."""
    parts = [
        _CACHE_FORMAT,
        hashlib.sha256(source.encode()).hexdigest(),
        name,
        list(kernels),
        list(arch),
        list(options),
        list(nvrtc_version()),
        header_digest,
    ]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


class _BadEntry(ValueError):
    """Why a cache entry is not used (the end of a sentence naming the file)."""


def _payload_checksum(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


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


def _parse_entry(
    text: str, key: str, kernels: tuple[str, ...], arch: tuple[int, int]
) -> CompiledSource:
    """The entry in ``text``, checked field by field, or a :class:`_BadEntry`."""
    try:
        data = json.loads(text)
    except ValueError:
        raise _BadEntry("is not valid JSON (truncated or corrupt)") from None
    if not isinstance(data, dict) or set(data) != {"format", "checksum", "payload"}:
        raise _BadEntry("is not an entry of this cache (its fields differ)")
    if data["format"] != _CACHE_FORMAT:
        raise _BadEntry(f"has format {data['format']!r}, not {_CACHE_FORMAT}")
    payload = data["payload"]
    if not isinstance(payload, dict) or set(payload) != set(_ENTRY_FIELDS):
        raise _BadEntry("is not an entry of this cache (its payload's fields differ)")
    if data["checksum"] != _payload_checksum(payload):
        raise _BadEntry("does not match its checksum")
    for field, kind in _ENTRY_FIELDS.items():
        if not isinstance(payload[field], kind):
            raise _BadEntry(
                f"has field {field!r} of type {type(payload[field]).__name__}, not {kind.__name__}"
            )
    if payload["key"] != key:
        raise _BadEntry("holds the entry of another compile (its key differs from its name)")
    if payload["arch"] != list(arch):
        raise _BadEntry(f"is for arch {payload['arch']!r}, not {list(arch)}")
    try:
        cubin = base64.b64decode(payload["cubin"], validate=True)
    except ValueError:
        raise _BadEntry("holds a cubin that is not base64") from None
    if not cubin.startswith(_ELF_MAGIC):
        raise _BadEntry("holds a cubin that is not an ELF file")
    entries = payload["entries"]
    if set(entries) != set(kernels) or not all(isinstance(v, str) for v in entries.values()):
        raise _BadEntry(f"holds lowered names for {sorted(entries)}, not for {sorted(kernels)}")
    try:
        in_ptx = set(ptx_entries(payload["ptx"]))
    except PtxError:
        raise _BadEntry("holds PTX that cannot be read") from None
    for kernel, lowered in entries.items():
        if lowered not in in_ptx or not _fits(kernel, lowered):
            raise _BadEntry(
                f"names {lowered!r} as the entry of kernel {kernel!r}, which is not a "
                "matching .entry of its PTX"
            )
    return CompiledSource(payload["name"], arch, payload["ptx"], cubin, entries, payload["log"])


def _load(
    path: Path, key: str, kernels: tuple[str, ...], arch: tuple[int, int]
) -> CompiledSource | None:
    """The entry at ``path``; None where there is none or it is not used (then an
    :class:`NvrtcCacheWarning` names the file and why)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        reason = f"cannot be read ({exc})"
    else:
        try:
            return _parse_entry(text, key, kernels, arch)
        except _BadEntry as exc:
            reason = str(exc)
    warnings.warn(
        f"cuda-source-ffi's NVRTC cache file {str(path)!r} {reason}; the source is "
        "compiled again and the file rewritten",
        NvrtcCacheWarning,
        stacklevel=3,
    )
    return None


def _store(path: Path, key: str, compiled: CompiledSource) -> None:
    """Write an entry atomically (a temporary file in the same directory, then
    ``os.replace``); a cache that cannot be written is skipped, as it only saves time."""
    payload = {
        "key": key,
        "name": compiled.name,
        "arch": list(compiled.arch),
        "ptx": compiled.ptx,
        "cubin": base64.b64encode(compiled.cubin).decode(),
        "entries": dict(compiled.entries),
        "log": compiled.log,
    }
    data = {"format": _CACHE_FORMAT, "checksum": _payload_checksum(payload), "payload": payload}
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


# --------------------------------------------------------------------------- API


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
    key = _cache_key(source, name, names, arch, opts, found.digest)
    with _memory_lock:
        hit = _memory.get(key)
    if hit is not None:
        return hit
    directory = None if searched or found.from_disk else _cache_dir()
    path = directory / f"{key}.json" if directory is not None else None
    compiled = _load(path, key, names, arch) if path is not None else None
    if compiled is None:
        compiled = _compile(source, name, names, arch, opts)
        if path is not None:
            _store(path, key, compiled)
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
