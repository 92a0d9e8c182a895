"""The NVRTC library through ``ctypes``: found and loaded once, its functions
declared, its version and architectures, and one compile of a program."""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import functools
import importlib.util
from collections.abc import Sequence
from pathlib import Path

from ffi_core.bridge import install_hint

_INSTALL_HINT = (
    f"{install_hint('cuda-source-ffi[cu13]')} for CUDA 13, or the same with "
    '"cuda-source-ffi[cu12]" for CUDA 12'
)

#: NVRTC from NVIDIA's wheels, relative to a directory of the ``nvidia`` namespace package.
_WHEEL_LIBS = ("cu13/lib/libnvrtc.so.13", "cuda_nvrtc/lib/libnvrtc.so.12")

_SUCCESS = 0
_COMPILATION = 6


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
