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
``~/.cache/cuda-source-ffi``), keyed by everything that decides the output,
the NVRTC version included, so a second process skips the compile.
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
from collections.abc import Sequence
from pathlib import Path

from ffi_core.cuda import ptx_entries, ptx_params

__all__ = [
    "CompiledSource",
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
_CACHE_FORMAT = 1

#: ``Input name expression was: " scale<float>"`` -- how NVRTC reports a name
#: expression that names no ``__global__`` function of the source.
_BAD_NAME = re.compile(r'Input name expression was: "\s*(.*?)\s*"')

#: Options that ``arch`` and the compile itself own.
_RESERVED_OPTIONS = ("-arch", "--gpu-architecture")


class NvrtcCompileError(RuntimeError):
    """NVRTC rejected a source: the message names the source and architecture,
    then gives NVRTC's log, which is also kept as ``log`` (``file(line): error: ...``)."""

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


def _cache_dir() -> Path:
    """``$CUDA_SOURCE_FFI_CACHE_DIR`` if set (only read here), else ``~/.cache/cuda-source-ffi``."""
    configured = os.environ.get("CUDA_SOURCE_FFI_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "cuda-source-ffi"


def _cache_key(
    source: str,
    name: str,
    kernels: tuple[str, ...],
    arch: tuple[int, int],
    options: tuple[str, ...],
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
    ]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _load(path: Path, key: str) -> CompiledSource | None:
    """The entry at ``path``, or None where it is missing, unreadable or not for ``key``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["key"] != key:
            return None
        arch = tuple(data["arch"])
        entries = data["entries"]
        if len(arch) != 2 or not all(isinstance(v, str) for v in entries.values()):
            return None
        return CompiledSource(
            name=str(data["name"]),
            arch=(int(arch[0]), int(arch[1])),
            ptx=str(data["ptx"]),
            cubin=base64.b64decode(data["cubin"], validate=True),
            entries=dict(entries),
            log=str(data["log"]),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _store(path: Path, key: str, compiled: CompiledSource) -> None:
    """Write an entry atomically (temporary file, then ``os.replace``); a cache that
    cannot be written is skipped, as it only saves time."""
    data = {
        "key": key,
        "name": compiled.name,
        "arch": list(compiled.arch),
        "ptx": compiled.ptx,
        "cubin": base64.b64encode(compiled.cubin).decode(),
        "entries": compiled.entries,
        "log": compiled.log,
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
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
        include_dirs: directories searched by ``#include``. Results using them
            are cached only in memory, since the headers' contents are not in
            the cache key.

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

    key = _cache_key(source, name, names, arch, opts)
    with _memory_lock:
        hit = _memory.get(key)
    if hit is not None:
        return hit
    on_disk = not dirs and not any(o.startswith(("-I", "--include-path")) for o in opts)
    path = _cache_dir() / f"{key}.json"
    compiled = _load(path, key) if on_disk else None
    if compiled is None:
        compiled = _compile(source, name, names, arch, opts)
        if on_disk:
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
