"""The GPU bridges' disk cache of compiled kernels: one file per key, read by a
later cache without building, every bad file a miss with a warning naming it
(and rewritten), the directory checked, nothing written where it may not be."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from ffi_core import CacheDirWarning
from ffi_core.bridge.cuda import ArtifactCache, ArtifactCacheWarning, ArtifactField, BadArtifact
from ffi_core.bridge.cuda._artifact_cache import _checksum
from ffi_core.testing import whole_message

ENV = "FFI_CORE_TEST_ARTIFACT_DIR"
FIELDS = {
    "ptx": ArtifactField("str"),
    "image": ArtifactField("bytes", prefix=b"\x7fELF"),
    "warps": ArtifactField("int", 1, 32),
    "names": ArtifactField("strs"),
}
BUILT = {"ptx": ".entry k", "image": b"\x7fELF-image", "warps": 4, "names": ("k",)}


def _cache(kind: str = "toy PTX") -> ArtifactCache:
    return ArtifactCache(kind, env=ENV, folder="toy", purpose="toy's kernel cache", fields=FIELDS)


class Builds:
    """A build that counts its calls; decode checks that the PTX names the entry."""

    def __init__(self) -> None:
        self.calls = 0

    def build(self) -> dict[str, Any]:
        self.calls += 1
        return dict(BUILT)

    @staticmethod
    def encode(built: dict[str, Any]) -> dict[str, Any]:
        return built

    @staticmethod
    def decode(values: dict[str, Any]) -> dict[str, Any]:
        if values["names"][0] not in values["ptx"]:
            raise BadArtifact(f"names an entry {values['names'][0]!r} its PTX does not have")
        return values

    def fetch(self, cache: ArtifactCache, key: str) -> dict[str, Any]:
        return cache.fetch(key, self.build, self.encode, self.decode)


@pytest.fixture
def directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv(ENV, str(path))
    return path


def test_a_later_cache_reads_without_building(directory: Path) -> None:
    builds = Builds()
    key = _cache().key("digest", (9, 0))
    assert builds.fetch(_cache(), key) == BUILT
    assert [p.name for p in directory.iterdir()] == [f"{key}.json"]
    assert os.stat(directory).st_mode & 0o777 == 0o700
    again = Builds()
    assert again.fetch(_cache(), key) == BUILT
    assert again.calls == 0


def test_keys_follow_every_part_and_the_kind() -> None:
    cache = _cache()
    key = cache.key("digest", (9, 0), {"opt": True})
    assert re.fullmatch("[0-9a-f]{64}", key)
    assert cache.key("digest", (9, 0), {"opt": True}) == key
    assert cache.key("digest", (8, 0), {"opt": True}) != key
    assert cache.key("other", (9, 0), {"opt": True}) != key
    assert _cache("other kind").key("digest", (9, 0), {"opt": True}) != key


def test_versions_are_in_the_key() -> None:
    plain = _cache().key("d")
    versioned = ArtifactCache(
        "toy PTX", env=ENV, folder="toy", purpose="p", fields=FIELDS, distributions=("numpy",)
    )
    absent = ArtifactCache(
        "toy PTX", env=ENV, folder="toy", purpose="p", fields=FIELDS,
        distributions=("no-such-distribution-here",),
    )  # fmt: skip
    assert len({plain, versioned.key("d"), absent.key("d")}) == 3


def test_a_package_cache_is_named_after_its_package(tmp_path, monkeypatch) -> None:
    cache = ArtifactCache.for_package(
        "toy-ffi", "toy PTX", env=ENV, fields=FIELDS, compilers=("numpy",), what="PTX cache"
    )
    same = ArtifactCache(
        "toy PTX", env=ENV, folder="toy-ffi", purpose="toy-ffi's PTX cache", fields=FIELDS,
        distributions=("numpy", "toy-ffi"),
    )  # fmt: skip
    assert cache.key("d") == same.key("d")
    assert (cache.purpose, cache.warning, cache.subject) == (
        "toy-ffi's PTX cache",
        ArtifactCacheWarning,
        "the kernel",
    )
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.directory() == tmp_path / "toy-ffi"


def _rewritten(path: Path, *, drop: str = "", **payload: Any) -> str:
    data = json.loads(path.read_text())
    fields = data["payload"]["fields"]
    fields.update(payload.pop("fields", {}))
    fields.pop(drop, None)
    data["payload"].update(payload)
    data["checksum"] = _checksum(data["payload"])
    return json.dumps(data)


def _corruptions(path: Path) -> dict[str, tuple[str, str]]:
    text = path.read_text()
    data = json.loads(text)
    elf = "has a field 'image' that is not base64 of bytes starting with b'\\x7fELF'"
    return {
        "empty": ("", "is not valid JSON (truncated or corrupt)"),
        "truncated": (text[:-9], "is not valid JSON (truncated or corrupt)"),
        "a-list": ("[]", "is not an entry of this cache (its fields differ)"),
        "format": (json.dumps(dict(data, format=7)), "has format 7, not 1"),
        "payload": (
            json.dumps(dict(data, payload=[])),
            "is not an entry of this cache (its payload's fields differ)",
        ),
        "checksum": (
            text.replace("LmVudHJ5IGs", "LmVudHJ5IGx").replace(".entry k", ".entry x"),
            "does not match its checksum",
        ),
        "kind": (_rewritten(path, kind="other"), "holds a 'other', not a 'toy PTX'"),
        "key": (
            _rewritten(path, key="0" * 64),
            "holds the entry of another compile (its key differs from its name)",
        ),
        "missing": (
            _rewritten(path, drop="warps"),
            "has the fields ['image', 'names', 'ptx'], not ['image', 'names', 'ptx', 'warps']",
        ),
        "extra": (
            _rewritten(path, fields={"code": "import os"}),
            "has the fields ['code', 'image', 'names', 'ptx', 'warps'], not "
            "['image', 'names', 'ptx', 'warps']",
        ),
        "str-type": (_rewritten(path, fields={"ptx": 3}), "has a field 'ptx' that is not a str"),
        "int-type": (
            _rewritten(path, fields={"warps": "4"}),
            "has a field 'warps' that is not an int in [1, 32]",
        ),
        "int-bool": (
            _rewritten(path, fields={"warps": True}),
            "has a field 'warps' that is not an int in [1, 32]",
        ),
        "int-range": (
            _rewritten(path, fields={"warps": 64}),
            "has a field 'warps' that is not an int in [1, 32]",
        ),
        "strs-type": (
            _rewritten(path, fields={"names": ["k", 1]}),
            "has a field 'names' that is not a list of str",
        ),
        "base64": (_rewritten(path, fields={"image": "!!"}), elf),
        "prefix": (_rewritten(path, fields={"image": "AAAA"}), elf),
        "decode": (
            _rewritten(path, fields={"names": ["q"]}),
            "names an entry 'q' its PTX does not have",
        ),
    }


@pytest.mark.parametrize(
    "corruption",
    [
        "empty", "truncated", "a-list", "format", "payload", "checksum", "kind", "key",
        "missing", "extra", "str-type", "int-type", "int-bool", "int-range", "strs-type",
        "base64", "prefix", "decode",
    ],
)  # fmt: skip
def test_a_bad_file_is_a_miss_with_a_warning_and_rewritten(
    directory: Path, corruption: str
) -> None:
    key = _cache().key("digest")
    Builds().fetch(_cache(), key)
    path = directory / f"{key}.json"
    written, reason = _corruptions(path)[corruption]
    path.write_text(written)
    builds = Builds()
    message = (
        f"toy's kernel cache file {str(path)!r} {reason}; the kernel is compiled again and "
        "the file rewritten"
    )
    with pytest.warns(ArtifactCacheWarning, match=whole_message(message)):
        assert builds.fetch(_cache(), key) == BUILT
    assert builds.calls == 1
    again = Builds()  # healed: read without a warning or a build
    assert again.fetch(_cache(), key) == BUILT
    assert again.calls == 0
    assert [p.name for p in directory.iterdir()] == [path.name]


def test_an_unreadable_file_is_a_miss(directory: Path) -> None:
    key = _cache().key("digest")
    Builds().fetch(_cache(), key)
    path = directory / f"{key}.json"
    path.write_bytes(b"\xff")
    message = (
        f"toy's kernel cache file {str(path)!r} cannot be read ('utf-8' codec can't decode byte "
        "0xff in position 0: invalid start byte); the kernel is compiled again and the file "
        "rewritten"
    )
    with pytest.warns(ArtifactCacheWarning, match=whole_message(message)):
        Builds().fetch(_cache(), key)


def test_the_warning_class_and_subject_are_the_bridges(directory: Path) -> None:
    class BridgeWarning(ArtifactCacheWarning):
        pass

    cache = ArtifactCache(
        "toy PTX", env=ENV, folder="toy", purpose="toy's cache", fields=FIELDS,
        warning=BridgeWarning, subject="the source",
    )  # fmt: skip
    key = cache.key("digest")
    Builds().fetch(cache, key)
    path = directory / f"{key}.json"
    path.write_text("{")
    message = (
        f"toy's cache file {str(path)!r} is not valid JSON (truncated or corrupt); the source "
        "is compiled again and the file rewritten"
    )
    with pytest.warns(BridgeWarning, match=whole_message(message)):
        Builds().fetch(cache, key)


def test_an_empty_variable_means_no_disk_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    builds = Builds()
    key = _cache().key("digest")
    builds.fetch(_cache(), key)
    builds.fetch(_cache(), key)
    assert builds.calls == 2
    assert _cache().directory() is None
    assert not list(tmp_path.iterdir())


def test_the_default_directory_is_under_the_cache_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _cache().directory() == tmp_path / "toy"
    Builds().fetch(_cache(), _cache().key("digest"))
    assert len(list((tmp_path / "toy").glob("*.json"))) == 1


def test_a_directory_others_may_write_is_refused(directory: Path) -> None:
    directory.mkdir()
    directory.chmod(0o777)
    message = (
        f"toy's kernel cache (${ENV}) is not kept on disk: the directory {str(directory)!r} "
        "is refused because group or others may write into it (mode 0777). Use a directory "
        "that only you own and may write (mode 0700), or remove this one so it is created anew."
    )
    builds = Builds()
    with pytest.warns(CacheDirWarning, match=whole_message(message)):
        assert builds.fetch(_cache(), _cache().key("digest")) == BUILT
    assert builds.calls == 1
    assert not list(directory.iterdir())


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_is_read_and_not_written(directory: Path) -> None:
    key = _cache().key("digest")
    Builds().fetch(_cache(), key)
    directory.chmod(0o500)
    try:
        builds = Builds()
        assert builds.fetch(_cache(), key) == BUILT and builds.calls == 0
        assert builds.fetch(_cache(), _cache().key("other")) == BUILT and builds.calls == 1
        assert len(list(directory.iterdir())) == 1
    finally:
        directory.chmod(0o700)


def test_a_write_that_fails_is_skipped(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    builds = Builds()
    assert builds.fetch(_cache(), _cache().key("digest")) == BUILT
    assert not list(directory.iterdir())  # the temporary file is removed too


def test_an_entry_a_field_would_not_read_back_is_a_bug(directory: Path) -> None:
    cache = _cache()
    bad = dict(BUILT, warps=0)
    with pytest.raises(
        ValueError, match=whole_message("a cache entry's value 0 is not an int in [1, 32]")
    ):
        cache.fetch(cache.key("digest"), lambda: bad, Builds.encode, Builds.decode)
    with pytest.raises(
        ValueError,
        match=whole_message(
            "a cache entry has the fields ['image', 'ptx'], not ['image', 'names', 'ptx', 'warps']"
        ),
    ):
        cache.fetch(
            cache.key("digest"),
            lambda: {"ptx": "", "image": b""},
            Builds.encode,
            Builds.decode,
        )
    assert not list(directory.iterdir())


def test_deep_nesting_is_a_miss(directory: Path) -> None:
    key = _cache().key("digest")
    Builds().fetch(_cache(), key)
    path = directory / f"{key}.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    message = (
        f"toy's kernel cache file {str(path)!r} is not valid JSON (truncated or corrupt); the "
        "kernel is compiled again and the file rewritten"
    )
    with pytest.warns(ArtifactCacheWarning, match=whole_message(message)):
        assert Builds().fetch(_cache(), key) == BUILT


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_what_is_no_file_at_the_name_is_a_miss(directory: Path, kind: str) -> None:
    # Neither an error (a directory) nor a wait for a writer (a FIFO).
    if kind == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this system")
    key = _cache().key("digest")
    Builds().fetch(_cache(), key)
    path = directory / f"{key}.json"
    path.unlink()
    path.mkdir() if kind == "directory" else os.mkfifo(path)
    message = (
        f"toy's kernel cache file {str(path)!r} is not a regular file; the kernel is compiled "
        "again and the file written in its place where it can be"
    )
    builds = Builds()
    with pytest.warns(ArtifactCacheWarning, match=whole_message(message)):
        assert builds.fetch(_cache(), key) == BUILT
    assert builds.calls == 1
    # A FIFO is replaced by the new file; a directory stays.
    assert path.is_dir() if kind == "directory" else path.is_file()
