"""Blobs you can authenticate: ``serialize(..., key=...)`` signs a blob,
``deserialize(..., key=...)`` refuses one that is unsigned or not signed with
the key before any byte reaches jaxlib; without a key an unsigned blob warns
once per process; the payload's module is checked before jaxlib parses it,
and ``isolate=True`` parses it in a child process, so a payload that aborts
jaxlib's reader is an ExportError."""

from __future__ import annotations

import hashlib
import re
import threading

import ffi_core
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ffi_core import ExportError, UnsignedBlobWarning
from ffi_core.export import _blob, _deserialize
from ffi_core.export._blob import HEADER, MAGIC
from ffi_core.export._payload import _varint, check_bytecode

X = np.arange(4, dtype=np.float32)
KEY = b"ffi-core tests: a key of 32 byte"
OTHER_KEY = b"ffi-core tests: another key here"


def _exported():
    return ffi_core.export(jnp.sin)(X)


def _reseal(blob: bytes) -> bytes:
    # What someone without the key can do: recompute the checksum (no secret),
    # which covers the header's lengths, the signature, the manifest and the payload.
    head, rest = blob[: HEADER - 32], blob[HEADER:]
    return head + hashlib.sha256(head + rest).digest() + rest


def _payload_offset(blob: bytes) -> int:
    at = len(MAGIC)
    manifest, _, signature = (
        int.from_bytes(blob[at + k : at + k + 8], "little") for k in (0, 8, 16)
    )
    return HEADER + signature + manifest


@pytest.fixture
def fresh_warning(monkeypatch):
    """The once-per-process warning not yet given."""
    monkeypatch.setattr(_deserialize, "_warned", threading.Event())


@pytest.fixture
def jax_reads(monkeypatch):
    """Every payload handed to jax.export.deserialize (the first reader of it)."""
    seen: list[bytes] = []
    original = jax.export.deserialize

    def record(payload):
        seen.append(bytes(payload))
        return original(payload)

    monkeypatch.setattr(jax.export, "deserialize", record)
    return seen


def test_a_signed_blob_round_trips_without_a_warning():
    blob = ffi_core.serialize(_exported(), key=KEY)
    assert blob.startswith(MAGIC)
    restored = ffi_core.deserialize(blob, key=KEY)
    np.testing.assert_allclose(restored.call(X), np.sin(X), rtol=1e-6)


def test_a_tampered_signed_blob_is_refused_before_jax_reads_it(jax_reads):
    blob = ffi_core.serialize(_exported(), key=KEY)
    at = _payload_offset(blob) + 40
    tampered = _reseal(blob[:at] + bytes([blob[at] ^ 0x34]) + blob[at + 1 :])
    with pytest.raises(
        ExportError,
        match=re.escape(
            "the blob's `signature` does not match `key`: it was signed with another key or "
            "changed after signing; refused unread"
        ),
    ):
        ffi_core.deserialize(tampered, key=KEY)
    assert jax_reads == []


def test_a_blob_signed_with_another_key_is_refused(jax_reads):
    blob = ffi_core.serialize(_exported(), key=OTHER_KEY)
    with pytest.raises(ExportError, match=re.escape("the blob's `signature` does not match `key`")):
        ffi_core.deserialize(blob, key=KEY)
    assert jax_reads == []


def test_an_unsigned_blob_is_refused_when_a_key_is_given(jax_reads):
    blob = ffi_core.serialize(_exported())
    with pytest.raises(
        ExportError,
        match=re.escape(
            "the blob is not signed, and `key` was given: refused unread (sign it with "
            "ffi_core.serialize(exported, key=...), or leave `key` out to read a blob you "
            "trust without a signature)"
        ),
    ):
        ffi_core.deserialize(blob, key=KEY)
    assert jax_reads == []


def test_an_unsigned_blob_read_without_a_key_warns_once_per_process(fresh_warning):
    blob = ffi_core.serialize(_exported())
    with pytest.warns(
        UnsignedBlobWarning,
        match=re.escape(
            "ffi_core.deserialize read a blob that is not signed. A blob is a program, like a "
            "pickle: read only blobs you trust"
        ),
    ):
        ffi_core.deserialize(blob)
    ffi_core.deserialize(blob)  # once: warnings are errors here, so a second one would raise


def test_a_signed_blob_read_without_a_key_is_checked_by_its_checksum(fresh_warning):
    blob = ffi_core.serialize(_exported(), key=KEY)
    np.testing.assert_allclose(ffi_core.deserialize(blob).call(X), np.sin(X), rtol=1e-6)
    at = _payload_offset(blob) + 40
    with pytest.raises(ExportError, match=re.escape("does not match its content")):
        ffi_core.deserialize(blob[:at] + bytes([blob[at] ^ 1]) + blob[at + 1 :])


def test_a_format_2_blob_still_reads(fresh_warning):
    # Format 2: magic, the manifest's and payload's lengths, SHA-256, manifest, payload.
    manifest = b'{"targets": {}}'
    payload = bytes(_exported().serialize())
    head = b"ffi-core export 2\n" + len(manifest).to_bytes(8, "little")
    head += len(payload).to_bytes(8, "little")
    blob = head + hashlib.sha256(head + manifest + payload).digest() + manifest + payload
    with pytest.warns(UnsignedBlobWarning):
        restored = ffi_core.deserialize(blob)
    np.testing.assert_allclose(restored.call(X), np.sin(X), rtol=1e-6)
    with pytest.raises(ExportError, match=re.escape("the blob is not signed, and `key` was given")):
        ffi_core.deserialize(blob, key=KEY)


@pytest.mark.parametrize(
    "key, error, message",
    [
        (
            "secret" * 4,
            TypeError,
            "`key` must be bytes (at least 16; 32 random bytes from secrets.token_bytes(32) are "
            "right) or None, got <class 'str'>",
        ),
        (
            b"short",
            ValueError,
            "`key` must be at least 16 bytes (32 random bytes from secrets.token_bytes(32) are "
            "right), got 5",
        ),
    ],
)
def test_a_bad_key_is_refused_naming_it(key, error, message):
    blob = ffi_core.serialize(_exported(), key=KEY)
    with pytest.raises(error, match=re.escape(message)):
        ffi_core.serialize(_exported(), key=key)
    with pytest.raises(error, match=re.escape(message)):
        ffi_core.deserialize(blob, key=key)


def test_isolate_must_be_a_bool():
    with pytest.raises(TypeError, match=re.escape("`isolate` must be a bool, got <class 'int'>")):
        ffi_core.deserialize(b"", isolate=1)


# -- the payload's module -------------------------------------------------------------


def _module_and_offset(payload: bytes) -> tuple[bytes, int]:
    module = bytes(jax.export.deserialize(bytearray(payload)).mlir_module_serialized)
    return module, payload.find(module)


def _section_data(module: bytes, wanted: int) -> int:
    # Where the data of section `wanted` starts (the tests' own walk of the framing).
    _, at = _varint(module, 4, "version")
    at = module.index(b"\0", at) + 1
    while at < len(module):
        section = module[at] & 0x7F
        length, at = _varint(module, at + 1, "length")
        if section == wanted:
            return at
        at += length
    raise AssertionError(f"no section {wanted}")


def test_a_good_module_passes_the_bytecode_check():
    module, _ = _module_and_offset(bytes(_exported().serialize()))
    check_bytecode(module)


@pytest.mark.parametrize(
    "cut, message",
    [
        (lambda m: b"MLIR" + m[4:], "the payload's module is not MLIR bytecode: it starts with"),
        (lambda m: m[:-1], "bytes long, past its end ("),
        (lambda m: m[:5], "the payload's module has no producer string of at most 256 bytes"),
        (lambda m: m[:4], "the payload's module ends inside its version"),
    ],
)
def test_a_badly_framed_module_is_refused(cut, message):
    module, _ = _module_and_offset(bytes(_exported().serialize()))
    with pytest.raises(ExportError, match=re.escape(message)):
        check_bytecode(cut(module))


def test_a_payload_that_crashes_jaxlib_is_an_export_error_with_isolate():
    # The first byte of the module's attribute/type offset section (3) changed:
    # the framing is intact, and jaxlib's reader dies on it. In the child
    # process of isolate=True that is an exit status, and an ExportError here.
    # (With the jaxlib of the lock file it aborts, on this function's payload.)
    # Signed with the key: the payload reaches the reader, as a blob from a
    # writer who holds the key (or one read without a key) does.
    payload = bytes(jax.export.export(jax.jit(jnp.sin))(X).serialize())
    module, offset = _module_and_offset(payload)
    at = offset + _section_data(module, 3)
    crafted = payload[:at] + bytes([payload[at] ^ 0x34]) + payload[at + 1 :]
    blob = _blob.pack(b'{"targets": {}}', crafted, KEY)
    with pytest.raises(
        ExportError,
        match=re.escape("the blob's JAX payload cannot be read: the child process parsing it "),
    ):
        ffi_core.deserialize(blob, key=KEY, isolate=True)


def test_isolate_reads_a_good_blob():
    blob = ffi_core.serialize(_exported(), key=KEY)
    restored = ffi_core.deserialize(blob, key=KEY, isolate=True)
    np.testing.assert_allclose(restored.call(X), np.sin(X), rtol=1e-6)
