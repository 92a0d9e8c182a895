"""The container :func:`ffi_core.serialize` writes, and its checks on reading.

Format 3, in order: :data:`MAGIC` (which holds the format version); the
manifest's, the payload's and the signature's lengths (8 bytes each,
little-endian; the signature's is 0 or 32); the SHA-256 checksum of
everything else; the signature, where the blob is signed (an HMAC-SHA256
under the writer's key of the magic, the lengths, the manifest and the
payload); the manifest (UTF-8 JSON: each target's recipes) and the payload
(``jax.export``'s bytes).

:func:`unpack` checks, before anything else reads the blob: the magic and
version, the lengths against the blob's size, the checksum, the signature
against the reader's key where one is given (an unsigned blob is then
refused), then the manifest against its schema (JSON of bounded nesting;
targets, chains and steps of the right types and counts; step values as
:func:`to_json` writes them; a step's ``distribution``, where it has one, a
distribution name). Every failure is an :class:`ExportError`
naming the field or the reason. Format 2 (the same without a signature) is
read as an unsigned blob; format 1 (no checksum) is refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import re
from typing import Any

from ._recipe import MAX_DISTRIBUTION, ExportError, check_distribution, from_json

__all__ = ["MAGIC", "MIN_KEY_BYTES", "Unpacked", "check_key", "pack", "unpack"]

#: The first bytes of a blob, with the format version this ffi-core writes.
MAGIC = b"ffi-core export 3\n"
_PREFIX = b"ffi-core export "
_FORMAT_1 = b"ffi-core export 1\n"
_FORMAT_2 = b"ffi-core export 2\n"
_CHECKSUM = 32
_SIGNATURE = 32
#: The header's size: magic, three lengths, checksum (a signature follows it).
HEADER = len(MAGIC) + 24 + _CHECKSUM
_HEADER_2 = len(_FORMAT_2) + 16 + _CHECKSUM
#: The shortest key :func:`pack` signs with and :func:`unpack` checks with.
MIN_KEY_BYTES = 16

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


def _hash(key: bytes | None, *parts: bytes | memoryview) -> bytes:
    h = hashlib.sha256() if key is None else hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        h.update(part)
    return h.digest()


def check_key(key: Any) -> bytes | None:
    """``key`` as bytes, or None; a TypeError or ValueError naming ``key`` otherwise."""
    if key is None:
        return None
    if not isinstance(key, bytes | bytearray):
        raise TypeError(
            f"`key` must be bytes (at least {MIN_KEY_BYTES}; 32 random bytes from "
            f"secrets.token_bytes(32) are right) or None, got {type(key)!r}"
        )
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(
            f"`key` must be at least {MIN_KEY_BYTES} bytes (32 random bytes from "
            f"secrets.token_bytes(32) are right), got {len(key)}"
        )
    return bytes(key)


def pack(manifest: bytes, payload: bytes, key: bytes | None = None) -> bytes:
    """The blob holding ``manifest`` (JSON) and ``payload``, signed with ``key`` if given."""
    signature_len = 0 if key is None else _SIGNATURE
    head = MAGIC + b"".join(
        n.to_bytes(8, "little") for n in (len(manifest), len(payload), signature_len)
    )
    signature = b"" if key is None else _hash(key, head, manifest, payload)
    checksum = _hash(None, head, signature, manifest, payload)
    return head + checksum + signature + manifest + payload


@dataclasses.dataclass(frozen=True)
class Unpacked:
    """What :func:`unpack` read: the checked recipes (target -> recipes ->
    decoded steps), the payload, and whether the blob carries a signature
    (checked when a key was given)."""

    targets: dict[str, list[list[dict[str, Any]]]]
    payload: bytearray
    signed: bool


def _check_magic(blob: bytes | bytearray) -> bool:
    # True for format 3, False for format 2; anything else is refused.
    if blob.startswith(MAGIC):
        return True
    if blob.startswith(_FORMAT_2):
        return False
    if blob.startswith(_FORMAT_1):
        raise ExportError(
            "the blob is in ffi-core export format 1, which has no checksum and is no "
            "longer read: export the function again with this ffi-core (format 3)"
        )
    if blob.startswith(_PREFIX) and blob[len(MAGIC) - 1 : len(MAGIC)] == b"\n":
        version = blob[len(_PREFIX) : len(MAGIC) - 1].decode("ascii", "replace")
        if version.isdigit():
            raise ExportError(
                f"the blob is in ffi-core export format {version}; this ffi-core reads "
                f"formats 2 and 3"
            )
    raise ExportError(
        f"{_CORRUPT}, or not one ffi_core.serialize wrote: its `magic` is not {MAGIC!r}, "
        f"got {bytes(blob[: len(MAGIC)])!r} "
        "(bytes from jax.export's own serialize are read by jax.export.deserialize)"
    )


def _check_header(
    blob: bytes | bytearray, key: bytes | None
) -> tuple[memoryview, memoryview, bool]:
    current = _check_magic(blob)
    header = HEADER if current else _HEADER_2
    if len(blob) < header:
        raise ExportError(f"{_CORRUPT}: {len(blob)} bytes, shorter than the {header}-byte header")
    at = len(MAGIC)
    lengths = [int.from_bytes(blob[k : k + 8], "little") for k in range(at, header - _CHECKSUM, 8)]
    manifest_len, payload_len = lengths[:2]
    signature_len = lengths[2] if current else 0
    if manifest_len > MAX_MANIFEST:
        raise ExportError(
            f"{_CORRUPT}: `manifest length` is {manifest_len}, more than {MAX_MANIFEST}"
        )
    if signature_len not in (0, _SIGNATURE):
        raise ExportError(
            f"{_CORRUPT}: `signature length` is {signature_len}, not 0 or {_SIGNATURE}"
        )
    if header + signature_len + manifest_len + payload_len != len(blob):
        raise ExportError(
            f"{_CORRUPT}: the header (`manifest length` {manifest_len}, `payload length` "
            f"{payload_len}, `signature length` {signature_len}) says "
            f"{header + signature_len + manifest_len + payload_len} bytes, the blob has "
            f"{len(blob)}"
        )
    view = memoryview(blob)  # slices of it are not copies
    head = view[: header - _CHECKSUM]
    signature = view[header : header + signature_len]
    manifest = view[header + signature_len : header + signature_len + manifest_len]
    payload = view[header + signature_len + manifest_len :]
    if _hash(None, head, signature, manifest, payload) != blob[header - _CHECKSUM : header]:
        raise ExportError(
            f"{_CORRUPT}: its `checksum` (SHA-256 of the header, signature, manifest and "
            "payload) does not match its content"
        )
    if key is not None:
        if not signature_len:
            raise ExportError(
                "the blob is not signed, and `key` was given: refused unread (sign it with "
                "ffi_core.serialize(exported, key=...), or leave `key` out to read a blob "
                "you trust without a signature)"
            )
        if not hmac.compare_digest(_hash(key, head, manifest, payload), signature):
            raise ExportError(
                "the blob's `signature` does not match `key`: it was signed with another "
                "key or changed after signing; refused unread"
            )
    return manifest, payload, bool(signature_len)


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
    if "distribution" in data and not check_distribution(data["distribution"]):
        raise ExportError(
            f"`{where}.distribution` must be a distribution name (ASCII letters and digits, "
            f"with '.', '_' or '-' inside; at most {MAX_DISTRIBUTION}), "
            f"got {data['distribution']!r:.80}"
        )
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


def unpack(blob: bytes | bytearray, key: bytes | None = None) -> Unpacked:
    """The blob's checked recipes and payload; with ``key``, only a blob it signed."""
    manifest, payload, signed = _check_header(blob, key)
    return Unpacked(_targets(_read_manifest(bytes(manifest))), bytearray(payload), signed)
