"""Where autotune decisions are kept: the directory of the cache on disk.

The lowest module of the autotuner: a decision names the directory it was
read from (``Decision.describe``), and the cache (``_cache``) reads and writes
its files there. The directory follows the workspace's one rule
(``ffi_core.checked_cache_dir``): one that is refused means decisions stay in
memory.
"""

from __future__ import annotations

import os
import pathlib

from ffi_core import cache_root, checked_cache_dir

__all__ = ["CACHE_ENV", "cache_dir", "usable_directory", "where"]

#: The environment variable naming the directory of the cache.
CACHE_ENV = "KERNEL_BENCH_AUTOTUNE_DIR"

# The directories refused in this process, each said once.
_refused: set[str] = set()


def cache_dir() -> pathlib.Path | None:
    """Where decisions are kept: ``$KERNEL_BENCH_AUTOTUNE_DIR`` (empty: on no
    disk, None; relative: from the current directory), else
    ``$XDG_CACHE_HOME/kernel-bench/autotune`` (``~/.cache/kernel-bench/autotune``).
    The directory is used only when ``ffi_core.checked_cache_dir`` accepts it
    (yours, not a symlink, not writable by group or others; created with mode
    0700); else decisions stay in memory."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit == "":
        return None
    if explicit is not None:
        return pathlib.Path(explicit).absolute()
    return cache_root() / "kernel-bench" / "autotune"


def where() -> str:
    """The cache's place as messages name it."""
    path = cache_dir()
    return str(path) if path is not None else f"memory only (${CACHE_ENV} is empty)"


def usable_directory() -> pathlib.Path | None:
    """The directory when it may be used (created 0700 if absent), else None;
    a refused one is said once per process and path."""
    path = cache_dir()
    if path is None:
        return None
    first = str(path) not in _refused
    checked = checked_cache_dir(path, purpose="the autotune cache of kernel-bench", warn=first)
    if checked is None:
        _refused.add(str(path))
    return checked
