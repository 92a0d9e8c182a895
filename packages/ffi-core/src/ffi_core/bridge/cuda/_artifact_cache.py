"""A disk cache of compiled GPU kernels (PTX, cubins and their launch metadata),
keyed by content and shared by the processes of one user.

Each entry is one JSON file named by its key, a digest of everything the
artefact depends on: the kernel's digest, its signature, the options, the
compute capability, the versions of the compiler and of the packages that
build it, and this cache's format. Kernels made in factories and closures
cache like any other (their digest covers what they capture); a path or a
modification time is never part of a key, so a directory filled while a
container image was built is read in the container.

An entry holds bytes and plain values only (no pickles): nothing in it names
what is imported, compiled or called. It is trusted only after its format, its
checksum, its kind, its key and every field's type and range are checked, and
after the bridge's own checks (its entry point is in its PTX, its parameters
are the ones the signature gives...). A file that fails any check is a miss:
the kernel is compiled again, the file rewritten, and a warning names the file
and the reason. The directory is checked by :func:`ffi_core.checked_cache_dir`
(0700, owned by the user, not a symlink); one that is refused means no disk
cache, with a :class:`ffi_core.CacheDirWarning`.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from ..._cache_dir import env_cache_dir, read_cache_file
from ..._version import __version__

__all__ = ["ArtifactCache", "ArtifactCacheWarning", "ArtifactField", "BadArtifact"]

#: Bumped whenever the file's layout or meaning changes; part of every key.
ARTIFACT_FORMAT = 1

T = TypeVar("T")

_INT_MAX = 2**63 - 1
#: The largest entry read: a compiled module, base64 in JSON, is far smaller.
_MAX_FILE_BYTES = 256 << 20


class ArtifactCacheWarning(UserWarning):
    """A file of a GPU kernel cache was corrupt or did not hold what its name
    promises; the kernel was compiled again and the file rewritten."""


class BadArtifact(ValueError):
    """Why an entry is not used: the end of a sentence that names the file
    ("holds a cubin that is not an ELF file"). A bridge's ``decode`` raises
    it for a check of its own."""


@dataclasses.dataclass(frozen=True)
class ArtifactField:
    """One field of an entry: its type and the values it may take.

    Attributes:
        kind: ``"bytes"`` (kept as base64), ``"str"``, ``"int"`` or ``"strs"``
            (a list of str, read back as a tuple).
        low: the smallest value of an ``"int"``.
        high: the largest value of an ``"int"``.
        prefix: what a ``"bytes"`` value must start with (``b"\\x7fELF"``).
    """

    kind: Literal["bytes", "str", "int", "strs"]
    low: int = 0
    high: int = _INT_MAX
    prefix: bytes = b""

    def describe(self) -> str:
        """The accepted values, for a message: "an int in [0, 1024]"."""
        if self.kind == "int":
            return f"an int in [{self.low}, {self.high}]"
        if self.kind == "bytes":
            start = f" starting with {self.prefix!r}" if self.prefix else ""
            return f"base64 of bytes{start}"
        return "a str" if self.kind == "str" else "a list of str"

    def load(self, value: object) -> Any:
        """``value`` as read from a file, checked; a :class:`BadArtifact` otherwise."""
        if self.kind == "str" and isinstance(value, str):
            return value
        if self.kind == "strs" and isinstance(value, list):
            if all(isinstance(v, str) for v in value):
                return tuple(value)
        if self.kind == "int" and isinstance(value, int) and not isinstance(value, bool):
            if self.low <= value <= self.high:
                return value
        if self.kind == "bytes" and isinstance(value, str):
            try:
                data = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                data = None
            if data is not None and data.startswith(self.prefix):
                return data
        raise BadArtifact(f"is not {self.describe()}")

    def dump(self, value: object) -> object:
        """``value`` as written to a file. A value this field would not read
        back is a ValueError (a bug in the bridge that built it)."""
        stored: object = value
        if self.kind == "bytes" and isinstance(value, bytes | bytearray):
            stored = base64.b64encode(bytes(value)).decode()
        elif self.kind == "strs" and isinstance(value, tuple | list):
            stored = list(value)
        try:
            self.load(stored)
        except BadArtifact as exc:
            raise ValueError(f"a cache entry's value {value!r:.80} {exc}") from None
        return stored


def _checksum(payload: Mapping[str, object]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _installed(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


class ArtifactCache:
    """A bridge's disk cache of compiled kernels.

    Args:
        kind: what an entry is ("numba-cuda PTX"); part of every key and
            checked in every file, so two caches sharing a directory never
            take each other's entries.
        env: the environment variable naming the directory, read at each
            use: set, its value; ``""``, no disk cache; unset, ``folder``
            under :func:`ffi_core.cache_root`.
        folder: the directory's name under :func:`ffi_core.cache_root`.
        purpose: the cache in words, for messages ("numba-cuda-ffi's kernel cache").
        fields: every field of an entry and what it may hold.
        distributions: the packages whose installed versions are part of every
            key (the compiler, the bridge); ffi-core's version always is.
        warning: the warning class for a bad entry (an :class:`ArtifactCacheWarning`).
        subject: what is compiled again, for the warning ("the kernel").

    Example:
        >>> cache = ArtifactCache(
        ...     "toy PTX", env="TOY_CACHE_DIR", folder="toy", purpose="toy's kernel cache",
        ...     fields={"ptx": ArtifactField("str")},
        ... )
        >>> len(cache.key("kernel digest", (9, 0)))
        64
    """

    def __init__(
        self,
        kind: str,
        *,
        env: str,
        folder: str,
        purpose: str,
        fields: Mapping[str, ArtifactField],
        distributions: tuple[str, ...] = (),
        warning: type[ArtifactCacheWarning] = ArtifactCacheWarning,
        subject: str = "the kernel",
    ) -> None:
        self.kind = kind
        self.env = env
        self.folder = folder
        self.purpose = purpose
        self.fields = dict(fields)
        self.distributions = distributions
        self.warning = warning
        self.subject = subject

    @classmethod
    def for_package(
        cls,
        package: str,
        kind: str,
        *,
        env: str,
        fields: Mapping[str, ArtifactField],
        compilers: tuple[str, ...] = (),
        what: str = "kernel cache",
        warning: type[ArtifactCacheWarning] = ArtifactCacheWarning,
        subject: str = "the kernel",
    ) -> ArtifactCache:
        """The cache of the bridge distribution ``package``: its directory is
        ``package`` under :func:`ffi_core.cache_root` (or ``$env``), its
        messages call it "``package``'s ``what``", and the installed versions
        of ``compilers`` and then ``package`` are part of every key.

        Example:
            >>> cache = ArtifactCache.for_package(
            ...     "toy-ffi", "toy PTX", env="TOY_FFI_CACHE_DIR",
            ...     fields={"ptx": ArtifactField("str")}, compilers=("numpy",),
            ... )
            >>> cache.folder, cache.purpose, cache.distributions
            ('toy-ffi', "toy-ffi's kernel cache", ('numpy', 'toy-ffi'))
        """
        return cls(
            kind,
            env=env,
            folder=package,
            purpose=f"{package}'s {what}",
            fields=fields,
            distributions=(*compilers, package),
            warning=warning,
            subject=subject,
        )

    def directory(self) -> Path | None:
        """The checked directory, or None when there is no disk cache."""
        return env_cache_dir(self.env, self.folder, purpose=self.purpose)

    @functools.cached_property
    def _versions(self) -> list[list[str]]:
        return [["ffi-core", __version__]] + [[d, _installed(d)] for d in self.distributions]

    def key(self, *parts: object) -> str:
        """The key of an artefact built from ``parts`` (plain values, compared
        by their ``repr``), this cache's kind and format, and the versions."""
        text = json.dumps([ARTIFACT_FORMAT, self.kind, self._versions, [repr(p) for p in parts]])
        return hashlib.sha256(text.encode()).hexdigest()

    def fetch(
        self,
        key: str,
        build: Callable[[], T],
        encode: Callable[[T], Mapping[str, object]],
        decode: Callable[[dict[str, Any]], T],
    ) -> T:
        """The artefact of ``key``: read from its file and decoded, or built,
        encoded and written there.

        ``decode`` gets every field checked (bytes as ``bytes``, a list of str
        as a tuple) and may raise :class:`BadArtifact` for a check of its own;
        a file that fails is a miss with a warning naming it.
        """
        directory = self.directory()
        if directory is None:
            return build()
        path = directory / f"{key}.json"
        found = self._read(path, key, decode)
        if found is not None:
            return found[0]
        built = build()
        self._write(path, key, encode(built))
        return built

    def _read(self, path: Path, key: str, decode: Callable[[dict[str, Any]], T]) -> tuple[T] | None:
        try:
            data = read_cache_file(path, max_bytes=_MAX_FILE_BYTES)
            if data is None:
                return None
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            reason = f"cannot be read ({exc})"
        except ValueError as exc:  # not a regular file, unreadable, too large
            reason = str(exc).removeprefix("it ")
        else:
            try:
                return (decode(self._parse(text, key)),)
            except BadArtifact as exc:
                reason = str(exc)
        # Where no regular file stands, the new one replaces it if it can (a
        # FIFO), not a directory.
        after = "written in its place where it can be" if "regular" in reason else "rewritten"
        warnings.warn(
            f"{self.purpose} file {str(path)!r} {reason}; {self.subject} is compiled again "
            f"and the file {after}",
            self.warning,
            stacklevel=4,
        )
        return None

    def _parse(self, text: str, key: str) -> dict[str, Any]:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            raise BadArtifact("is not valid JSON (truncated or corrupt)") from None
        if not isinstance(data, dict) or set(data) != {"format", "checksum", "payload"}:
            raise BadArtifact("is not an entry of this cache (its fields differ)")
        if data["format"] != ARTIFACT_FORMAT:
            raise BadArtifact(f"has format {data['format']!r}, not {ARTIFACT_FORMAT}")
        payload = data["payload"]
        if not isinstance(payload, dict) or set(payload) != {"kind", "key", "fields"}:
            raise BadArtifact("is not an entry of this cache (its payload's fields differ)")
        if data["checksum"] != _checksum(payload):
            raise BadArtifact("does not match its checksum")
        if payload["kind"] != self.kind:
            raise BadArtifact(f"holds a {payload['kind']!r}, not a {self.kind!r}")
        if payload["key"] != key:
            raise BadArtifact("holds the entry of another compile (its key differs from its name)")
        stored = payload["fields"]
        if not isinstance(stored, dict) or set(stored) != set(self.fields):
            names = sorted(stored) if isinstance(stored, dict) else stored
            raise BadArtifact(f"has the fields {names!r}, not {sorted(self.fields)}")
        values = {}
        for name, field in self.fields.items():
            try:
                values[name] = field.load(stored[name])
            except BadArtifact as exc:
                raise BadArtifact(f"has a field {name!r} that {exc}") from None
        return values

    def _write(self, path: Path, key: str, values: Mapping[str, object]) -> None:
        # Atomic: a temporary file in the same directory, then os.replace. A
        # directory that cannot be written (read-only, full) is skipped, as
        # the cache only saves time.
        if set(values) != set(self.fields):
            raise ValueError(
                f"a cache entry has the fields {sorted(values)}, not {sorted(self.fields)}"
            )
        stored = {name: field.dump(values[name]) for name, field in self.fields.items()}
        payload = {"kind": self.kind, "key": key, "fields": stored}
        data = {"format": ARTIFACT_FORMAT, "checksum": _checksum(payload), "payload": payload}
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
