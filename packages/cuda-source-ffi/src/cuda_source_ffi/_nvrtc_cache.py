"""The cache of compiled sources: in memory per process, and on disk one JSON
file per compile, trusted only after every field is checked."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

from ffi_core import cache_root, checked_cache_dir
from ffi_core.cuda import PtxError, ptx_entries

from ._compiled import CompiledSource
from ._nvrtc_library import nvrtc_version

__all__ = ["NvrtcCacheWarning"]

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


class NvrtcCacheWarning(UserWarning):
    """A file of the NVRTC disk cache was corrupt or did not hold what its
    name promises; the source was compiled again and the file rewritten."""


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


def _cache_key(compile_args: tuple[Any, ...], header_digest: str) -> str:
    """A digest of everything that decides the compiled output: the arguments
    of the compile (source, name, kernels, arch, options), the headers the
    source reaches, NVRTC's version and this cache's format."""
    source, *settings = compile_args
    parts = [
        _CACHE_FORMAT,
        hashlib.sha256(source.encode()).hexdigest(),
        *settings,
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
