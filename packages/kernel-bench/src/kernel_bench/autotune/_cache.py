"""Where autotune decisions are kept: the cache on disk.

One JSON file per platform and fingerprint (the machine and the software:
the versions of the third-party compilers and runtimes, and of every installed
package of this project, found as the distributions that require ffi-core;
and whether idle CPUs were kept awake, as kernel-bench's suite keeps them).
Nothing read back is trusted: a file that is not a decision file (not JSON,
not an object, too large or too deeply nested, a fingerprint of the wrong
shape or not the one its name stands for) is ignored with an
:class:`AutotuneWarning` naming it, and rewritten with the next decision; an
entry that :func:`parse_decision` refuses is ignored the same way and measured
again. The directory follows the workspace's one rule
(``ffi_core.checked_cache_dir``): one that is refused means decisions stay in
memory. Writes are atomic: a temporary file, flushed to disk, renamed over the
file, under a lock so that two processes writing at once both keep theirs.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json
import os
import pathlib
import platform as _platform
import re
import tempfile
import threading
import warnings
from collections.abc import Collection, Mapping
from typing import Any

import jax
from ffi_core.bridge import directory_lock, read_cache_file

from .. import _awake
from .._load import usable_cpus
from ._decision import (
    BACKEND_PLATFORMS,
    AutotuneWarning,
    Decision,
    InvalidDecision,
    _fields,
    _json,
    _kind,
    _short,
    parse_decision,
)
from ._location import CACHE_ENV, usable_directory

# Third-party packages that decisions depend on (the compilers and runtimes of
# the backends). This project's own packages are found, not listed: see
# _project_packages.
_THIRD_PARTY = ("jax", "jaxlib", "numpy", "numba", "numba-cuda", "warp-lang", "triton")
# Every package of this project depends on it, or is it.
_ROOT_PACKAGE = "ffi-core"
_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# A cache file larger than this is not read.
_MAX_FILE_BYTES = 64 << 20
_MAX_TEXT = 100_000
_FILE_NAME = re.compile(r"(cpu|gpu|tpu)-[0-9a-f]{16}\.json")
_FINGERPRINT_FIELDS = ("platform", "device", "cpu", "cpu_count", "python", "versions")
#: The fingerprint's field, and its one value, for decisions measured while
#: this process kept idle CPUs awake (``kernel_bench._awake.held``); absent
#: otherwise, so the files of processes that never do keep their names.
IDLE_FIELD, KEPT_AWAKE = "idle", "kept awake"


# ------------------------------------------------------------------ the machine and software


@functools.cache
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _platform.processor() or _platform.machine()


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _project_packages() -> list[str]:
    """The installed packages of this project: ffi-core and every installed
    distribution that requires it (the bridges, xla-custom-kernel,
    kernel-bench, and any other package built on ffi-core), sorted."""
    found = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        requires = (_REQUIREMENT_NAME.match(r) for r in dist.requires or ())
        if _canonical(name) == _ROOT_PACKAGE or any(
            m is not None and _canonical(m.group()) == _ROOT_PACKAGE for m in requires
        ):
            found.add(_canonical(name))
    return sorted(found)


@functools.cache
def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in (*_THIRD_PARTY, *_project_packages()):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def fingerprint(platform: str) -> dict[str, Any]:
    """What a decision on ``platform`` depends on besides the call: the machine
    (its CPU model and how many CPUs this process may run on) and the
    software. Decisions are filed under it."""
    device = jax.devices(platform)[0]
    found = {
        "platform": platform,
        "device": getattr(device, "device_kind", str(device)),
        "cpu": _cpu_model(),
        # The CPUs the process may run on: a ranking made on one CPU does
        # not hold on several.
        "cpu_count": len(cpus) if (cpus := usable_cpus()) is not None else os.cpu_count(),
        "python": _platform.python_version(),
        "versions": _versions(),
    }
    if _awake.held():
        # Timed with idle CPUs kept awake (kernel-bench's suite): a threaded
        # backend wakes faster than in a user's process, so such decisions
        # are filed apart and neither kind is read for the other.
        found[IDLE_FIELD] = KEPT_AWAKE
    return found


def _check_fingerprint(record: Any) -> dict[str, Any]:
    idle = (IDLE_FIELD,) if isinstance(record, dict) and IDLE_FIELD in record else ()
    f = _fields(record, _FINGERPRINT_FIELDS + idle, "its fingerprint")
    ok = (
        f.get(IDLE_FIELD, KEPT_AWAKE) == KEPT_AWAKE
        and f["platform"] in BACKEND_PLATFORMS
        and all(isinstance(f[n], str) and len(f[n]) <= _MAX_TEXT for n in ("device", "cpu"))
        and isinstance(f["python"], str)
        and (f["cpu_count"] is None or type(f["cpu_count"]) is int)
        and isinstance(f["versions"], dict)
        and all(v is None or isinstance(v, str) for v in f["versions"].values())
    )
    if not ok:
        raise InvalidDecision(f"its fingerprint is not one this module writes: {_short(f)}")
    return dict(f)


def _file_name(fingerprint_: Mapping[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(fingerprint_, sort_keys=True).encode()).hexdigest()[:16]
    return f"{fingerprint_['platform']}-{digest}.json"


# ------------------------------------------------------------------ the directory and its files

_lock = threading.RLock()
# The entries of the cache files read in this process, by path (checked when used).
_disk: dict[pathlib.Path, dict[str, Any]] = {}


def _files(directory: pathlib.Path) -> list[pathlib.Path]:
    # Only the names this module writes: not its temporary files nor anything else.
    return sorted(p for p in directory.iterdir() if _FILE_NAME.fullmatch(p.name))


def _load(path: pathlib.Path) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The fingerprint and the entries of a cache file ((None, {}) where there
    is none). Raises InvalidDecision for a file that is not a decision file."""
    try:
        data = read_cache_file(path, max_bytes=_MAX_FILE_BYTES)
    except ValueError as exc:
        raise InvalidDecision(str(exc)) from None
    if data is None:
        return None, {}
    content = _json(data, "a decision file")
    if not isinstance(content, dict) or set(content) != {"fingerprint", "decisions"}:
        raise InvalidDecision(
            f"it holds {_kind(content)}, not an object of 'fingerprint' and 'decisions'"
        )
    fingerprint_ = _check_fingerprint(content["fingerprint"])
    if path.name != _file_name(fingerprint_):
        raise InvalidDecision("its fingerprint is not the one its name stands for")
    if not isinstance(content["decisions"], dict):
        raise InvalidDecision(f"its decisions are {_kind(content['decisions'])}, not an object")
    return fingerprint_, content["decisions"]


def _ignored(what: str, problem: str) -> None:
    warnings.warn(
        f"kernel-bench ignores {what}: {problem}. It counts as not cached: the decision is "
        "measured again where needed and the file rewritten",
        AutotuneWarning,
        stacklevel=5,
    )


def _read(path: pathlib.Path, *, warn: bool = True) -> dict[str, Any]:
    try:
        return _load(path)[1]
    except InvalidDecision as exc:
        if warn:
            _ignored(f"the autotune cache file {path}", str(exc))
        return {}


def _valid_entries(entries: Mapping[str, Any]) -> dict[str, Any]:
    kept = {}
    for key, record in entries.items():
        with contextlib.suppress(InvalidDecision):
            parse_decision(record, key=key)
            kept[key] = record
    return kept


def _write(
    path: pathlib.Path,
    fingerprint_: Mapping[str, Any] | None,
    decisions: dict[str, Any],
    *,
    merge: bool = True,
    drop: Collection[str] = (),
) -> int:
    # Another process may have written decisions since this one read the
    # file: merge its valid entries (unless the point is to drop some), less
    # the keys in ``drop``, then replace the file in one step (a temporary
    # file, flushed to disk, renamed over it). A fingerprint of None keeps the
    # file's, all under the directory's lock, so that two processes writing
    # at once both keep their decisions. Returns how many of ``drop`` the
    # file held.
    with directory_lock(path.parent):
        try:
            found, entries = _load(path)
        except InvalidDecision:
            found, entries = None, {}
        merged = {**_valid_entries(entries), **decisions} if merge else decisions
        dropped = [key for key in drop if merged.pop(key, None) is not None]
        if drop and not dropped and not decisions:
            return 0  # nothing to change
        fingerprint_ = found if fingerprint_ is None else fingerprint_
        if fingerprint_ is None:
            return 0
        text = json.dumps({"fingerprint": fingerprint_, "decisions": merged}, indent=1)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return len(dropped)


def from_disk(platform: str, key: str, op: str, backends: tuple[str, ...]) -> Decision | None:
    """The decision stored for ``key`` on this machine, checked, or None (a
    miss, with an :class:`AutotuneWarning` where what is stored is bad)."""
    directory = usable_directory()
    if directory is None:
        return None
    fingerprint_ = fingerprint(platform)
    path = directory / _file_name(fingerprint_)
    with _lock:
        if path not in _disk:
            try:
                found, entries = _load(path)
                if found is not None and found != fingerprint_:
                    raise InvalidDecision("its fingerprint is not this machine's and software's")
            except InvalidDecision as exc:
                _ignored(f"the autotune cache file {path}", str(exc))
                entries = {}
            _disk[path] = entries
        record = _disk[path].get(key)
    if record is None:
        return None
    try:
        return parse_decision(
            record, key=key, op=op, platform=platform, backends=backends, source="disk"
        )
    except InvalidDecision as exc:
        _ignored(f"the autotune decision {_short(key)} in {path}", str(exc))
        return None


def to_disk(platform: str, decision: Decision) -> None:
    """Keep ``decision`` in the cache file of this machine (nothing where the
    directory is refused; a warning where it cannot be written)."""
    directory = usable_directory()
    if directory is None:
        return
    fingerprint_ = fingerprint(platform)
    path = directory / _file_name(fingerprint_)
    stored = decision.to_dict()
    try:
        _write(path, fingerprint_, {decision.key: stored})
    except OSError as exc:
        warnings.warn(
            f"kernel-bench could not write the autotune cache {path}: {exc}; decisions are "
            f"kept in this process only (set ${CACHE_ENV} to a writable directory)",
            AutotuneWarning,
            stacklevel=4,
        )
    with _lock:
        _disk.setdefault(path, {})[decision.key] = stored


def cached_decisions() -> list[Decision]:
    """Every decision in the cache on disk, for every machine and version;
    bad files and entries are left out with an :class:`AutotuneWarning`."""
    return _stored(warn=True)


def cached_ops() -> set[str]:
    """The operations the cache on disk holds decisions of (bad files and
    entries left out, without a warning)."""
    return {d.op for d in _stored(warn=False)}


def _stored(*, warn: bool) -> list[Decision]:
    directory = usable_directory()
    if directory is None:
        return []
    found = []
    for path in _files(directory):
        for key, record in _read(path, warn=warn).items():
            try:
                found.append(parse_decision(record, key=key, source="disk"))
            except InvalidDecision as exc:
                if warn:
                    _ignored(f"the autotune decision {_short(key)} in {path}", str(exc))
    return found


def remove(op: str | None) -> int:
    """Remove the decisions of ``op`` (all when None) from the disk; returns how
    many. Bad entries go too, and files left without a decision, bad files
    included, are deleted."""
    directory = usable_directory()
    removed = 0
    with _lock:
        _disk.clear()
        if directory is None:
            return 0
        for path in _files(directory):
            stored = _read(path, warn=False)
            entries = _valid_entries(stored)
            keep = {k: d for k, d in entries.items() if op is not None and d["op"] != op}
            try:
                if not keep:
                    path.unlink()
                elif len(keep) != len(stored):
                    _write(path, None, keep, merge=False)
            except FileNotFoundError:
                pass  # removed by another process meanwhile
            except OSError as exc:
                # A directory at the name (read as no decisions) stays as it
                # is; a file of a read-only cache keeps its decisions.
                if entries:
                    warnings.warn(
                        f"kernel-bench could not remove decisions from the autotune cache "
                        f"{path}: {exc.strerror or exc}",
                        AutotuneWarning,
                        stacklevel=3,
                    )
                continue
            removed += len(entries) - len(keep)
    return removed


def remove_keys(platform: str, keys: Collection[str]) -> int:
    """Remove the decisions of ``keys`` from this machine's file for ``platform``
    (the one :func:`from_disk` reads; other machines' and versions' files are
    left alone); returns how many it held."""
    directory = usable_directory()
    if directory is None or not keys:
        return 0
    path = directory / _file_name(fingerprint(platform))
    with _lock:
        _disk.pop(path, None)
        return _write(path, None, {}, drop=keys)
