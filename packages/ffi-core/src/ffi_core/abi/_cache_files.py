"""The lowest rules for a cache's files: how one is opened for reading, and
the lock processes take to change a cache directory one at a time.

In the ABI layer (it imports nothing else of ffi-core) because the numba
handler cache there reads and writes its files by them; ``ffi_core._cache_dir``
builds the cache directories' rules on them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = ["directory_lock", "open_cache_file"]


def open_cache_file(path: Path | str) -> tuple[int, os.stat_result] | None:
    """An open read-only descriptor of cache file ``path`` and its status,
    or None where there is none; the caller closes the descriptor.

    Only a regular file is opened: a symbolic link is not followed, and a
    FIFO or a device at the name is not waited on for a writer to come.

    Raises:
      ValueError: what stands at ``path`` cannot be a cache file, with the
        reason ("it is a symbolic link", "it is not a regular file", "it
        cannot be read (...)"); the caller counts it as a miss.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ValueError("it is a symbolic link") from None
        raise ValueError(f"it cannot be read ({error.strerror or error})") from None
    try:
        info = os.fstat(fd)
    except OSError as error:
        os.close(fd)
        raise ValueError(f"it cannot be read ({error.strerror or error})") from None
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ValueError("it is not a regular file")
    return fd, info


@contextlib.contextmanager
def directory_lock(directory: Path | str) -> Iterator[None]:
    """Hold an exclusive lock on ``directory``'s ``.lock`` file (made with
    mode 0600) while the block runs, so that processes reading, changing and
    writing a cache's files do so one at a time. No lock where there is no
    ``flock`` or the file cannot be made (a read-only cache, which the block
    cannot write either)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        fd = os.open(
            os.path.join(directory, ".lock"),
            os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0),
            0o600,
        )
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
