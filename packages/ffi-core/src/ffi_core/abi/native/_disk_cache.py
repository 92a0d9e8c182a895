"""Numba's cache for compiled kernels and handlers, kept in checked
directories and verified before anything in them is loaded: the bridges'
native handlers (numba-cpu-ffi's kernels and handlers, the CUDA launcher's
handlers) are cached through it.

Numba's own ``cache=True`` chooses its directory itself (``$NUMBA_CACHE_DIR``,
a ``__pycache__`` beside the source, ``~/.cache/numba``), names its files by
the source file and line, and unpickles its index and data files as it finds
them: a truncated or flipped file raises at every later call, in every
process, and some flipped bytes make LLVM abort the process. Here compiled
code goes only to the directory the caller checked
(:func:`ffi_core.checked_cache_dir`: 0700, owned by the user), under a name the caller derives from everything
the code depends on, and each file carries a SHA-256 of its contents that is
verified before Numba sees a byte of it. A file that fails the check, or an
entry that fails to load, is deleted with a :class:`HandlerCacheWarning`
naming it, and the code is compiled again and saved afresh. Prebuilt
directories (:class:`Layers`' ``read``) are searched after it and never
written: a bad file there is ignored with the same warning. Besides code
compiled for this machine's CPU model, a prebuilt directory may hold code
compiled for a portable CPU model (:data:`PORTABLE_CPUS`), loaded where this
machine has the features it needs (:func:`portable_cpus`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import pickle
import stat
import sys
import types as pytypes
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numba
from numba.core import sigutils
from numba.core.caching import (
    CompileResultCacheImpl,
    FunctionCache,
    IndexDataCacheFile,
    _CacheLocator,
)
from numba.core.ccallback import CFunc

from .._cache_files import directory_lock, open_cache_file

__all__ = [
    "PORTABLE_CPUS",
    "HandlerCacheWarning",
    "Layers",
    "cache_dispatcher",
    "cached_cfunc",
    "cached_njit",
    "handler_module",
    "handler_name",
    "portable_cpus",
]

#: The first bytes of every file written here, then the SHA-256 of the rest
#: (the format's name, as numba-cpu-ffi's caches have always been written).
_MAGIC = b"numba-cpu-ffi handler cache 1\n"
_HEADER = len(_MAGIC) + hashlib.sha256().digest_size


_X86_64_V2 = frozenset({"cx16", "popcnt", "sahf", "sse3", "sse4.1", "sse4.2", "ssse3"})
_X86_64_V3 = _X86_64_V2 | {"avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"}
_X86_64_V4 = _X86_64_V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}

#: The CPU models code may be compiled for to run on other CPU models (LLVM's
#: names, best first), each with the LLVM features a machine needs to run it:
#: the x86-64 levels on x86-64 machines, ``"generic"`` (the architecture's
#: baseline) everywhere.
PORTABLE_CPUS: Mapping[str, frozenset[str]] = pytypes.MappingProxyType(
    {
        "x86-64-v4": _X86_64_V4,
        "x86-64-v3": _X86_64_V3,
        "x86-64-v2": _X86_64_V2,
        "generic": frozenset(),
    }
)


@functools.cache
def portable_cpus() -> tuple[str, ...]:
    """The models of :data:`PORTABLE_CPUS` whose code this machine runs, best first.

    Example:
        >>> portable_cpus()[-1]
        'generic'
    """
    from llvmlite import binding

    if not binding.get_process_triple().startswith("x86_64"):
        return ("generic",)
    try:
        host = {name for name, on in binding.get_host_cpu_features().items() if on}
    except RuntimeError:  # LLVM cannot tell on this machine: the baseline only
        host = set()
    return tuple(cpu for cpu, needs in PORTABLE_CPUS.items() if needs <= host)


class HandlerCacheWarning(UserWarning):
    """A file of the handler cache was corrupt, failed to load or was no
    regular file; it was deleted where it could be (the warning says which)
    and the handler compiled again."""


def _discard(
    path: str, seen: os.stat_result | None, reason: str, what: str, *, keep: bool = False
) -> None:
    # Delete only the file that was read: another process may have replaced
    # it with a healthy one since. ``keep``: a read-only layer, left as it is.
    done = "it is ignored"
    if not keep:
        try:
            now = os.lstat(path)
            if seen is None or (now.st_ino, now.st_mtime_ns) == (seen.st_ino, seen.st_mtime_ns):
                os.unlink(path)
                done = "it was deleted"
        except FileNotFoundError:
            done = "it was deleted"  # by another process
        except OSError as error:
            done = f"it is ignored (it cannot be deleted: {error.strerror or error})"
    warnings.warn(
        f"{what} file {path!r} {reason}; {done} and the handler is compiled again",
        HandlerCacheWarning,
        stacklevel=2,
    )


class _ChecksummedCacheFile(IndexDataCacheFile):
    """Numba's index (``.nbi``) and data (``.nbc``) files, each written
    atomically as ``_MAGIC + sha256(payload) + payload`` and read back only
    when the checksum matches."""

    #: The file read last, named when what it held fails to load.
    last_read: str | None = None
    #: A layer this process only reads (prebuilt): a bad file is left in place.
    readonly: bool = False
    #: What the cache is called in warnings (``Layers.what``).
    what: str = "the handler cache"
    #: A prebuilt directory: it may hold code for a portable CPU model.
    prebuilt: bool = False

    def _read_verified(self, path: str) -> bytes | None:
        self.last_read = path
        # A miss where there is none, as in Numba. Only a regular file is
        # read (its code runs in this process): no symbolic link followed, no
        # wait for a writer at a FIFO. In a prebuilt directory, which others
        # may enter, only one its owner alone may write (the user's cache is
        # mode 0700: no one else reaches its files).
        try:
            opened = open_cache_file(path)
        except ValueError as error:
            _discard(path, None, str(error).removeprefix("it "), self.what, keep=True)
            return None
        if opened is None:
            raise FileNotFoundError(path)
        fd, info = opened
        if self.readonly and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            os.close(fd)
            reason = f"may be written by group or others (mode {stat.S_IMODE(info.st_mode):04o})"
            _discard(path, None, reason, self.what, keep=True)
            return None
        with os.fdopen(fd, "rb") as f:
            content = f.read()
        payload = content[_HEADER:]
        if (
            len(content) < _HEADER
            or not content.startswith(_MAGIC)
            or content[len(_MAGIC) : _HEADER] != hashlib.sha256(payload).digest()
        ):
            _discard(
                path,
                info,
                "does not match its checksum (truncated or corrupt)",
                self.what,
                keep=self.readonly,
            )
            return None
        return payload

    def _write_checksummed(self, path: str, payload: bytes) -> None:
        # Numba's writer goes through a unique temporary file and os.replace,
        # so a reader sees the old file or the new one, never a mix.
        with self._open_for_write(path) as f:
            f.write(_MAGIC + hashlib.sha256(payload).digest() + payload)

    def save(self, key: Any, data: Any) -> None:
        # Numba reads the index, picks the first free data file name, writes
        # the index, then the data. Two processes saving other keys at once
        # (code for two CPU models into one shared cache) could both pick
        # ``.1.nbc``, and one key end up naming the other's code: the steps
        # run under a lock on the directory, so each sees the other's entry.
        with directory_lock(self._cache_path):
            super().save(key, data)

    def _load_index(self) -> dict[Any, str]:
        try:
            payload = self._read_verified(self._index_path)
        except FileNotFoundError:
            return {}
        if payload is None:
            return {}
        version, stamp, overloads = pickle.loads(payload)
        if version != self._version or stamp != self._source_stamp:
            return {}
        return overloads

    def _save_index(self, overloads: dict[Any, str]) -> None:
        payload = self._dump((self._version, self._source_stamp, overloads))
        self._write_checksummed(self._index_path, payload)

    def _load_data(self, name: str) -> Any:
        payload = self._read_verified(self._data_path(name))
        return None if payload is None else pickle.loads(payload)

    def load_first(self, keys: Sequence[Any]) -> Any:
        """The data of the first of ``keys`` the index holds (the index read
        once), or None."""
        overloads = self._load_index()
        name = next((overloads[key] for key in keys if key in overloads), None)
        if name is None:
            return None
        try:
            return self._load_data(name)
        except OSError:  # removed since the index was read, as in Numba
            return None

    def _save_data(self, name: str, data: Any) -> None:
        self._write_checksummed(self._data_path(name), self._dump(data))


@dataclasses.dataclass(frozen=True)
class Layers:
    """Where compiled code is kept: ``write``, the user's checked cache
    directory (None: none), read and written; then ``read``, prebuilt
    directories, only read. ``what`` names the cache in warnings."""

    write: Path | None = None
    read: tuple[Path, ...] = ()
    what: str = "the handler cache"

    def __bool__(self) -> bool:
        return self.write is not None or bool(self.read)


class _Locator(_CacheLocator):
    """One checked directory, and nothing else (Numba's locators would follow
    ``$NUMBA_CACHE_DIR`` or write a ``__pycache__`` beside the source)."""

    def __init__(self, directory: Path, stamp: str) -> None:
        self._directory = directory
        self._stamp = stamp

    def ensure_cache_path(self) -> None:
        pass  # created and checked by cache_dir()

    def get_cache_path(self) -> str:
        return str(self._directory)

    def get_source_stamp(self) -> str:
        return self._stamp

    def get_disambiguator(self) -> str:
        return ""

    @classmethod
    def from_function(cls, py_func: Any, py_file: Any) -> None:
        return None  # never chosen by Numba's search


class _Impl(CompileResultCacheImpl):
    def __init__(self, base: str, locator: _Locator) -> None:
        # Numba's __init__ searches its own locators (and $NUMBA_CACHE_LOCATOR_CLASSES)
        # and names files by source path and line; here the name is given.
        self._lineno = 0
        self._locator = locator
        self._filename_base = base


class _LayeredCache(FunctionCache):
    """A ``FunctionCache`` over :class:`Layers` whose files are named ``base``
    (a name derived from everything the compiled code depends on) and
    checksummed; an entry that fails to load is a miss."""

    def __init__(self, py_func: Callable[..., Any], layers: Layers, base: str) -> None:
        self._name = repr(py_func)
        self._py_func = py_func
        self._base = base
        directories = ([layers.write] if layers.write is not None else []) + list(layers.read)
        self._writable = layers.write is not None
        self._impl = _Impl(base, _Locator(directories[0], base))
        self._cache_path = str(directories[0])
        self._files = []
        for k, directory in enumerate(directories):
            file = _ChecksummedCacheFile(
                cache_path=str(directory), filename_base=base, source_stamp=base
            )
            file.readonly = k > 0 or not self._writable
            file.what = layers.what
            file.prebuilt = directory in layers.read
            self._files.append(file)
        self._cache_file = self._files[0]
        self.enable()

    def _index_key(self, sig: Any, codegen: Any) -> Any:
        # The name covers the code, its globals and closure values and the
        # versions; the machine's CPU is the codegen's magic tuple.
        return (sig, codegen.magic_tuple(), self._base)

    def _load_overload(self, sig: Any, target_context: Any) -> Any:
        if not self._enabled:
            return None
        key = self._index_key(sig, target_context.codegen())
        # A prebuilt directory's code for this machine's CPU model, else for
        # the best portable model this machine runs (the names are ours,
        # never read from the files).
        triple = key[1][0]
        portable = [(sig, (triple, cpu, ""), self._base) for cpu in portable_cpus()]
        for file in self._files:
            file.last_read = None
            with self._bad_entry_is_a_miss(file):
                data = file.load_first([key, *portable] if file.prebuilt else [key])
                if data is not None:
                    return self._impl.rebuild(target_context, data)
        return None

    def _save_overload(self, sig: Any, data: Any) -> None:
        if not self._writable:
            return
        try:
            super()._save_overload(sig, data)
        except OSError:
            # A cache directory on a read-only file system (a container
            # layer filled at build time): used for reading only.
            pass

    @contextlib.contextmanager
    def _bad_entry_is_a_miss(self, file: _ChecksummedCacheFile) -> Iterator[None]:
        # A file that passed its checksum but does not load (written by a
        # build that differs in a way the key misses) is discarded like a
        # corrupt one.
        try:
            yield
        except Exception as error:  # any failure to load is a miss
            path = file.last_read or file._index_path
            _discard(
                path,
                None,
                f"failed to load ({type(error).__name__}: {error})",
                file.what,
                keep=file.readonly,
            )


def cached_cfunc(layers: Layers, base: str) -> Callable[..., Any]:
    """``numba.cfunc`` whose compiled code is cached in ``layers`` under the
    name ``base`` (not cached when there are no layers)."""

    def decorator(sig: Any) -> Callable[[Callable[..., Any]], CFunc]:
        def wrap(func: Callable[..., Any]) -> CFunc:
            compiled = CFunc(func, sigutils.normalize_signature(sig), locals={}, options={})
            if layers:
                # CFunc reads its cache from this attribute, which numba's types do not declare.
                compiled._cache = _LayeredCache(func, layers, base)  # type: ignore[attr-defined]
            compiled.compile()
            return compiled

        return wrap

    return decorator


def cached_njit(layers: Layers, base: str) -> Callable[..., Any]:
    """``numba.njit`` whose compiled code is cached in ``layers`` under the
    name ``base`` (not cached when there are no layers)."""

    def decorator(**options: Any) -> Callable[[Callable[..., Any]], Any]:
        def wrap(func: Callable[..., Any]) -> Any:
            return cache_dispatcher(numba.njit(**options)(func), layers, base)

        return wrap

    return decorator


def cache_dispatcher(dispatcher: Any, layers: Layers, base: str) -> Any:
    """``dispatcher`` (``@numba.njit``), its compiled code cached in
    ``layers`` under the name ``base`` (not cached when there are no layers)."""
    if layers:
        # What Dispatcher.enable_caching does, with this cache.
        dispatcher._cache = _LayeredCache(dispatcher.py_func, layers, base)
    return dispatcher


#: The modules whose code reaches a compiled handler: the call-frame helpers
#: it inlines or links and the ABI they read (offsets, dtype codes, enums).
NATIVE_MODULES = (
    "ffi_core.abi._capi",
    "ffi_core.abi._dtypes",
    "ffi_core.abi.native._frame",
    "ffi_core.abi.native._guarded",
    "ffi_core.abi.native._intrinsics",
)


@functools.cache
def _native_code() -> bytes:
    # The SHA-256 of NATIVE_MODULES' source files (the installed ffi-core's
    # version where a file cannot be read: an installation without sources).
    import importlib
    import importlib.metadata

    digest = hashlib.sha256()
    for name in NATIVE_MODULES:
        module = importlib.import_module(name)
        try:
            digest.update(Path(module.__file__ or "").read_bytes())
        except OSError:
            digest.update(f"{name} {importlib.metadata.version('ffi-core')}".encode())
    return digest.digest()


def handler_name(prefix: str, source: str, parts: Iterable[str]) -> str:
    """The name a generated handler is cached under: ``prefix`` and 24 hex
    digits of the SHA-256 of its ``source``, of ``parts`` (everything else its
    compiled code depends on: the versions of the compilers and of the
    packages whose code it inlines; where its globals come from) and of the
    code of ffi-core's call-frame helpers and ABI (:data:`NATIVE_MODULES`),
    which every handler inlines: a handler compiled against other helpers is
    a miss, whatever the versions say.

    Example:
        >>> handler_name("h_", "def handler(): ...", ["numba 0.61"])[:2]
        'h_'
    """
    digest = hashlib.sha256(source.encode())
    for part in parts:
        digest.update(part.encode())
    digest.update(_native_code())
    return f"{prefix}{digest.hexdigest()[:24]}"


def handler_module(name: str, source: str, namespace: Mapping[str, Any], filename: str) -> Any:
    """``source`` run as the module ``name`` with ``namespace`` preset and
    ``filename`` as its ``__file__``. The module is registered in
    ``sys.modules``, where Numba finds a cached function's module when it
    rebuilds the function's environment, and removed again if the source
    raises."""
    module = pytypes.ModuleType(name)
    module.__dict__.update(namespace)
    module.__file__ = filename
    sys.modules[name] = module
    try:
        exec(compile(source, filename, "exec"), module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module
