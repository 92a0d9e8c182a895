"""The container :func:`ffi_core.serialize` writes, and its checks on reading.

Format 2, in order: :data:`MAGIC` (which holds the format version), the
manifest's length and the payload's length (8 bytes each, little-endian), the
SHA-256 of everything else (magic, lengths, manifest, payload), the manifest
(UTF-8 JSON: each target's recipes) and the payload (``jax.export``'s bytes).

:func:`unpack` checks, before anything else reads the blob: the magic and
version, the lengths against the blob's size, the checksum, then the manifest
against its schema (JSON of bounded nesting; targets, chains and steps of the
right types and counts; step values as :func:`to_json` writes them). Every
failure is an :class:`ExportError` naming the field. Format 1 (no checksum)
is refused: export the function again.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ._recipe import ExportError, from_json

__all__ = ["MAGIC", "pack", "unpack"]

#: The first bytes of a blob, with the format version this ffi-core writes and reads.
MAGIC = b"ffi-core export 2\n"
_PREFIX = b"ffi-core export "
_FORMAT_1 = b"ffi-core export 1\n"
_LENGTHS = 16
_CHECKSUM = 32
HEADER = len(MAGIC) + _LENGTHS + _CHECKSUM

#: The largest manifest read (16 MiB; a real one holds a few KiB per target).
MAX_MANIFEST = 1 << 24
#: The most targets, recipes per target and steps per recipe a manifest holds.
MAX_TARGETS = 4096
MAX_CHAINS = 64
MAX_STEPS = 16
#: The deepest nesting of JSON arrays and objects in a manifest.
MAX_JSON_DEPTH = 64
_NAME = re.compile(r"[A-Za-z_][\w.]{0,127}", re.ASCII)
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(rb"[\[\]{}]")
_CORRUPT = "corrupt or truncated blob"


def _checksum(
    head: bytes | memoryview, manifest: bytes | memoryview, payload: bytes | memoryview
) -> bytes:
    h = hashlib.sha256()
    for part in (head, manifest, payload):
        h.update(part)
    return h.digest()


def pack(manifest: bytes, payload: bytes) -> bytes:
    """The blob holding ``manifest`` (JSON) and ``payload``."""
    head = MAGIC + len(manifest).to_bytes(8, "little") + len(payload).to_bytes(8, "little")
    return head + _checksum(head, manifest, payload) + manifest + payload


def _check_header(blob: bytes | bytearray) -> tuple[memoryview, memoryview]:
    if not blob.startswith(MAGIC):
        if blob.startswith(_FORMAT_1):
            raise ExportError(
                "the blob is in ffi-core export format 1, which has no checksum and is no "
                "longer read: export the function again with this ffi-core (format 2)"
            )
        if blob.startswith(_PREFIX) and blob[len(MAGIC) - 1 : len(MAGIC)] == b"\n":
            version = blob[len(_PREFIX) : len(MAGIC) - 1].decode("ascii", "replace")
            if version.isdigit():
                raise ExportError(
                    f"the blob is in ffi-core export format {version}; this ffi-core reads "
                    f"format 2 only"
                )
        raise ExportError(
            f"{_CORRUPT}, or not one ffi_core.serialize wrote: its `magic` is not {MAGIC!r}, got {bytes(blob[: len(MAGIC)])!r} "
            "(bytes from jax.export's own serialize are read by jax.export.deserialize)"
        )
    if len(blob) < HEADER:
        raise ExportError(f"{_CORRUPT}: {len(blob)} bytes, shorter than the {HEADER}-byte header")
    at = len(MAGIC)
    manifest_len = int.from_bytes(blob[at : at + 8], "little")
    payload_len = int.from_bytes(blob[at + 8 : at + 16], "little")
    if manifest_len > MAX_MANIFEST:
        raise ExportError(
            f"{_CORRUPT}: `manifest length` is {manifest_len}, more than {MAX_MANIFEST}"
        )
    if HEADER + manifest_len + payload_len != len(blob):
        raise ExportError(
            f"{_CORRUPT}: the header (`manifest length` {manifest_len}, `payload length` "
            f"{payload_len}) says {HEADER + manifest_len + payload_len} bytes, the blob has "
            f"{len(blob)}"
        )
    view = memoryview(blob)  # slices of it are not copies
    manifest = view[HEADER : HEADER + manifest_len]
    payload = view[HEADER + manifest_len :]
    if _checksum(view[: at + _LENGTHS], manifest, payload) != blob[at + _LENGTHS : HEADER]:
        raise ExportError(
            f"{_CORRUPT}: its `checksum` (SHA-256 of the header, manifest and payload) does "
            "not match its content"
        )
    return manifest, payload


def _json_depth(text: bytes) -> int:
    # Counted before parsing: json.loads recurses once per level.
    depth = deepest = 0
    for match in _BRACKETS.finditer(_STRINGS.sub(b'""', text)):
        depth += 1 if match.group() in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _read_manifest(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExportError(f"`manifest` is not UTF-8: {exc}") from None
    if _json_depth(raw) > MAX_JSON_DEPTH:
        raise ExportError(f"`manifest` is nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ExportError(f"`manifest` is not JSON: {exc}") from None


def _list(value: Any, where: str, max_len: int) -> list[Any]:
    if not isinstance(value, list) or not 1 <= len(value) <= max_len:
        got = f"{len(value)} items" if isinstance(value, list) else type(value).__qualname__
        raise ExportError(f"`{where}` must be a list of 1 to {max_len} items, got {got}")
    return value


def _step(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ExportError(f"`{where}` must be a dict, got {type(data).__qualname__}")
    kind = data.get("kind")
    if not (isinstance(kind, str) and _NAME.fullmatch(kind)):
        raise ExportError(
            f"`{where}.kind` must be a str of letters, digits, '_' and '.' (at most 128), "
            f"got {kind!r:.80}"
        )
    for key in data:
        if not _NAME.fullmatch(key):
            raise ExportError(f"`{where}` has a field name that is not an identifier: {key!r:.80}")
    return {key: from_json(value, f"{where}.{key}") for key, value in data.items()}


def _targets(manifest: Any) -> dict[str, list[list[dict[str, Any]]]]:
    if not isinstance(manifest, dict) or sorted(manifest) != ["targets"]:
        got = sorted(manifest) if isinstance(manifest, dict) else type(manifest).__qualname__
        raise ExportError(f"`manifest` must be a dict with the one key 'targets', got {got}")
    targets = manifest["targets"]
    if not isinstance(targets, dict) or len(targets) > MAX_TARGETS:
        got = f"{len(targets)} items" if isinstance(targets, dict) else type(targets).__qualname__
        raise ExportError(f"`targets` must be a dict of at most {MAX_TARGETS} items, got {got}")
    out = {}
    for target, chains in targets.items():
        if not 1 <= len(target) <= 1024:
            raise ExportError(f"`targets` holds a name of {len(target)} characters (1 to 1024)")
        where = f"targets[{target!r}]"
        out[target] = [
            [
                _step(s, f"{where}[{i}][{j}]")
                for j, s in enumerate(_list(c, f"{where}[{i}]", MAX_STEPS))
            ]
            for i, c in enumerate(_list(chains, where, MAX_CHAINS))
        ]
    return out


def unpack(blob: bytes | bytearray) -> tuple[dict[str, list[list[dict[str, Any]]]], bytearray]:
    """The checked recipes (target -> recipes -> decoded steps) and the payload."""
    manifest, payload = _check_header(blob)
    return _targets(_read_manifest(bytes(manifest))), bytearray(payload)
