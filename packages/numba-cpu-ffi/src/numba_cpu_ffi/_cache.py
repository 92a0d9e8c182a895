"""Where compiled kernels and handlers are kept and looked up: the user's
cache directory, then prebuilt directories that libraries ship.

A library that builds its kernels ahead of time (``numba_cpu_ffi.prebuild``)
ships the directory in its wheel or image and names it with
:func:`add_prebuilt_dir` at import, or a user names directories in
``$NUMBA_CPU_FFI_PREBUILT`` (separated by ``os.pathsep``). They are only
read, never written; since code is loaded from them, one that is a symbolic
link, is not a directory, or that group or others may write into is refused
with a ``ffi_core.CacheDirWarning`` (its owner may be another user: files
installed with a package usually belong to whoever installed it).
"""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path

from ffi_core import CacheDirWarning
from ffi_core.abi.native import Layers
from ffi_core.bridge import env_cache_dir, unsafe_reason

__all__ = [
    "CACHE_ENV",
    "PREBUILT_ENV",
    "add_prebuilt_dir",
    "cache_dir",
    "cache_layers",
    "ignore_prebuilt_dirs",
    "prebuilt_dirs",
]

#: The environment variable naming the user's cache directory ("": none).
CACHE_ENV = "NUMBA_CPU_FFI_CACHE_DIR"

#: The environment variable naming prebuilt directories, read at each lookup.
PREBUILT_ENV = "NUMBA_CPU_FFI_PREBUILT"

_lock = threading.Lock()
_added: list[Path] = []
_refused: set[tuple[str, str]] = set()
# False in a worker of numba_cpu_ffi.prebuild: what it builds goes into its
# output directory, none of it found in a prebuilt directory instead.
_read_prebuilt = True


def ignore_prebuilt_dirs() -> None:
    """Read no prebuilt directory for the rest of the process (a worker of
    ``numba_cpu_ffi.prebuild``, which compiles every kernel into its output)."""
    global _read_prebuilt
    _read_prebuilt = False


def cache_dir() -> Path | None:
    """Where compiled kernels and handlers are kept, or None when there is
    no disk cache (they are then compiled in every process).

    ``$NUMBA_CPU_FFI_CACHE_DIR`` wins (empty: no disk cache); otherwise
    ``$XDG_CACHE_HOME/numba-cpu-ffi`` (``~/.cache/numba-cpu-ffi``). The
    directory is created with mode 0700; one that is a symlink, is not owned
    by the current user or may be written by group or others is refused with
    an ``ffi_core.CacheDirWarning`` (None), since compiled code and pickles
    are loaded from it. A directory on a read-only file system (filled when
    a container image was built) is read and not written.
    """
    return env_cache_dir(CACHE_ENV, "numba-cpu-ffi", purpose="numba-cpu-ffi's handler cache")


def add_prebuilt_dir(path: str | os.PathLike[str]) -> None:
    """Read compiled kernels and handlers from ``path`` too (after the user's
    cache), for the rest of the process.

    A library calls it at import with the directory it ships, for example
    ``add_prebuilt_dir(importlib.resources.files(__name__) / "kernels")``.
    Adding a directory twice adds it once.

    Raises:
        TypeError: ``path`` is not a str or path.
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"`path` must be a str or os.PathLike, got {type(path)!r}")
    resolved = Path(path).absolute()
    with _lock:
        if resolved not in _added:
            _added.append(resolved)


def prebuilt_dirs() -> tuple[Path, ...]:
    """The prebuilt directories read now: ``$NUMBA_CPU_FFI_PREBUILT``'s, then
    those added with :func:`add_prebuilt_dir`, less any refused (warned
    once per directory and reason)."""
    if not _read_prebuilt:
        return ()
    named = [Path(p) for p in os.environ.get(PREBUILT_ENV, "").split(os.pathsep) if p]
    with _lock:
        candidates = [*named, *_added]
    accepted: list[Path] = []
    for path in candidates:
        reason = unsafe_reason(path, any_owner=True)
        if reason is None:
            if path not in accepted:
                accepted.append(path)
            continue
        with _lock:
            seen = (str(path), reason) in _refused
            _refused.add((str(path), reason))
        if not seen:
            warnings.warn(
                f"numba-cpu-ffi's prebuilt directory {str(path)!r} is not read because "
                f"{reason}; prebuilt directories must be real directories that only their "
                "owner may write",
                CacheDirWarning,
                stacklevel=3,
            )
    return tuple(accepted)


def cache_layers() -> Layers:
    """The layers compiled code is looked up in: the user's cache directory
    (:func:`cache_dir`, written too) then the prebuilt directories."""
    write = cache_dir()
    read = tuple(d for d in prebuilt_dirs() if d != write)
    return Layers(write, read, what="numba-cpu-ffi's handler cache")
