"""The one rule for where this workspace's packages keep caches on disk.

A cache directory holds files that are later loaded (pickles, compiled code,
decisions). Whoever can write into it can make a later process run their code,
so a directory is only used when it belongs to the current user, is a real
directory (not a symlink), and no one else may write into it. New directories
are created with mode 0700. A directory that breaks the rule is refused with a
warning, and the caller runs without a disk cache.
"""

from __future__ import annotations

import os
import stat
import warnings
from pathlib import Path

from .abi._cache_files import open_cache_file

__all__ = [
    "CacheDirWarning",
    "cache_root",
    "checked_cache_dir",
    "env_cache_dir",
    "read_cache_file",
    "unsafe_reason",
]


class CacheDirWarning(UserWarning):
    """A cache directory that is refused (not ours, writable by others, a
    symlink) or cannot be created; the package then runs without disk cache."""


def cache_root() -> Path:
    """``$XDG_CACHE_HOME`` when set to an absolute path, else ``~/.cache``
    (relative, ``~`` unexpanded, where the home directory is unknown: then
    :func:`checked_cache_dir` refuses it)."""
    configured = os.environ.get("XDG_CACHE_HOME", "")
    if configured and os.path.isabs(configured):
        return Path(configured)
    return Path(os.path.expanduser("~")) / ".cache"


def unsafe_reason(path: Path, *, any_owner: bool = False) -> str | None:
    """Why ``path`` may not hold a cache, or None when it may.

    Checked with ``lstat``: a symlink is refused even when it points somewhere safe,
    since its target can change after the check. ``any_owner``: a directory of
    another user is accepted (one only read, such as prebuilt kernels
    installed with a package), still not one that group or others may write."""
    try:
        info = os.lstat(path)
    except OSError as error:
        return f"it cannot be inspected ({error.strerror or error})"
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a directory"
    if not any_owner and hasattr(os, "getuid") and info.st_uid != os.getuid():
        return f"it is owned by uid {info.st_uid}, not by the current user (uid {os.getuid()})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"group or others may write into it (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def checked_cache_dir(path: Path | str, *, purpose: str, warn: bool = True) -> Path | None:
    """``path`` created (mode 0700, parents as needed) and checked, or None.

    Args:
      path: the cache directory.
      purpose: what the cache holds, for the warning ("numba-cpu-ffi's handler cache").
      warn: warn with :class:`CacheDirWarning` when the directory is refused.

    Returns:
      The directory when it is safe to load files from it; None when it is refused
      (relative, a symlink, not a directory, someone else's, writable by group or
      others) or cannot be created, in which case the caller keeps no disk cache.
    """
    path = Path(path)
    reason: str | None
    advice = (
        "Use a directory that only you own and may write (mode 0700), or remove this one so "
        "it is created anew."
    )
    if not path.is_absolute():
        # ~ stays unexpanded where $HOME is unset and the user has no home
        # in the password database (a container run as a bare uid).
        reason = "it is a relative path, which would move with the current directory"
        if path.parts[:1] == ("~",):
            reason += " (the home directory is unknown)"
            advice = "Set $HOME or $XDG_CACHE_HOME, or name an absolute directory."
        else:
            advice = "Name an absolute directory."
    else:
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as error:
            reason = f"it cannot be created ({error.strerror or error})"
        else:
            reason = unsafe_reason(path)
    if reason is None:
        return path
    if warn:
        warnings.warn(
            f"{purpose} is not kept on disk: the directory {str(path)!r} is refused because "
            f"{reason}. {advice}",
            CacheDirWarning,
            stacklevel=3,
        )
    return None


def env_cache_dir(env: str, folder: str, *, purpose: str) -> Path | None:
    """The checked directory a package keeps a cache in, or None for none:
    ``$env`` when set (empty: no disk cache), else ``folder`` under
    :func:`cache_root`; checked by :func:`checked_cache_dir`, whose warning
    names ``purpose`` and the variable. Read at each call, so a test may
    point the variable elsewhere.
    """
    configured = os.environ.get(env)
    if configured == "":
        return None
    # A relative setting is the directory it names from where the process started.
    path = Path(configured).absolute() if configured is not None else cache_root() / folder
    return checked_cache_dir(path, purpose=f"{purpose} (${env})")


def read_cache_file(path: Path | str, *, max_bytes: int) -> bytes | None:
    """The bytes of cache file ``path``, or None where there is none.

    Opened by :func:`open_cache_file`: only a regular file, no symbolic link
    followed, no wait at a FIFO.

    Raises:
      ValueError: what stands at ``path`` cannot be a cache file, with the
        reason (those of :func:`open_cache_file`, or "it is larger than ..."),
        the caller counts it as a miss.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> read_cache_file(folder / "absent.json", max_bytes=10) is None
        True
        >>> read_cache_file(folder, max_bytes=10)
        Traceback (most recent call last):
        ...
        ValueError: it is not a regular file
    """
    opened = open_cache_file(path)
    if opened is None:
        return None
    fd, _ = opened
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as error:
        raise ValueError(f"it cannot be read ({error.strerror or error})") from None
    finally:
        os.close(fd)
    if size > max_bytes:
        limit = f"{max_bytes >> 20} MiB" if max_bytes % (1 << 20) == 0 else f"{max_bytes} bytes"
        raise ValueError(f"it is larger than {limit}")
    return b"".join(chunks)
