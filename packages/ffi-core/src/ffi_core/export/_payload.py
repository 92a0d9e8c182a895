"""Checks of a blob's JAX payload before jaxlib's native reader parses it.

jaxlib reads the module of an exported function (MLIR bytecode) in C++, and a
crafted module can abort the process there. What can be checked in Python is
checked first (:func:`check_bytecode`: the bytecode's magic, version,
producer and the sections' framing); the rest of the module cannot be, so
:func:`parse_isolated` parses the payload in a child process, where an abort
is an exit status, not the caller's crash. ``python -m ffi_core.export._payload``
is that child: it reads the payload on stdin and imports nothing but JAX.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from ._recipe import ExportError

__all__ = ["ISOLATE_TIMEOUT_S", "check_bytecode", "parse_isolated"]

_BYTECODE_MAGIC = b"ML\xefR"
#: How long the child of :func:`parse_isolated` may take.
ISOLATE_TIMEOUT_S = 300
_PADDING = 0xCB  # MLIR pads an aligned section with these bytes
_MAX_PRODUCER = 256


def _varint(data: bytes, at: int, what: str) -> tuple[int, int]:
    # MLIR's prefix varint: the trailing zeros of the first byte say how many
    # bytes follow; a zero byte is followed by 8 bytes of value.
    if at >= len(data):
        raise ExportError(f"the payload's module ends inside its {what}")
    first = data[at]
    size = 9 if first == 0 else (first & -first).bit_length()
    if at + size > len(data):
        raise ExportError(f"the payload's module ends inside its {what}")
    raw = int.from_bytes(data[at : at + size], "little")
    return (raw >> 8 if first == 0 else raw >> size), at + size


def check_bytecode(module: bytes) -> None:
    """An :class:`ExportError` unless ``module`` is framed as MLIR bytecode:
    the magic, a version, a producer string, then sections (an id, a length,
    an alignment and its padding) that end exactly at its end, no id twice."""
    if not module.startswith(_BYTECODE_MAGIC):
        raise ExportError(
            f"the payload's module is not MLIR bytecode: it starts with {module[:4]!r}, "
            f"not {_BYTECODE_MAGIC!r}"
        )
    _, at = _varint(module, len(_BYTECODE_MAGIC), "version")
    end = module.find(b"\0", at, at + _MAX_PRODUCER)
    if end < 0:
        raise ExportError(
            f"the payload's module has no producer string of at most {_MAX_PRODUCER} bytes"
        )
    at = end + 1
    seen: set[int] = set()
    while at < len(module):
        section = module[at] & 0x7F
        aligned = module[at] & 0x80
        where = f"section at byte {at}"
        if section in seen:
            raise ExportError(f"the payload's module holds section {section} twice ({where})")
        seen.add(section)
        length, at = _varint(module, at + 1, f"{where}'s length")
        if aligned:
            alignment, at = _varint(module, at, f"{where}'s alignment")
            if alignment < 1 or alignment & (alignment - 1) or alignment > 1 << 16:
                raise ExportError(
                    f"the payload's module: {where} has an alignment of {alignment}, not a "
                    "power of 2 up to 65536"
                )
            pad = 0
            while at < len(module) and module[at] == _PADDING and pad < alignment - 1:
                at, pad = at + 1, pad + 1
        if at + length > len(module):
            raise ExportError(
                f"the payload's module: {where} is {length} bytes long, past its end "
                f"({len(module) - at} bytes left)"
            )
        at += length


def _environment() -> dict[str, str]:
    # The child finds JAX where this process does: this process's sys.path.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def parse_isolated(payload: bytes | bytearray) -> None:
    """Parse ``payload`` with ``jax.export`` and jaxlib in a child process; an
    :class:`ExportError` saying how the child ended unless it read it."""
    try:
        result = subprocess.run(
            [sys.executable, "-m", "ffi_core.export._payload"],
            input=bytes(payload),
            env=_environment(),
            capture_output=True,
            timeout=ISOLATE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ExportError(
            f"the blob's JAX payload was not parsed in {ISOLATE_TIMEOUT_S} s by the child "
            "process reading it"
        ) from None
    if result.returncode == 0:
        return
    if result.returncode < 0:
        try:
            how = f"was killed by {signal.Signals(-result.returncode).name}"
        except ValueError:
            how = f"was killed by signal {-result.returncode}"
    else:
        lines = [s for s in result.stderr.decode("utf-8", "replace").splitlines() if s.strip()]
        how = f"failed: {lines[-1].strip() if lines else f'exit status {result.returncode}'}"
    raise ExportError(f"the blob's JAX payload cannot be read: the child process parsing it {how}")


def _main() -> None:
    import jax

    from ._export import custom_call_targets

    payload = bytearray(sys.stdin.buffer.read())
    exported = jax.export.deserialize(payload)
    check_bytecode(bytes(exported.mlir_module_serialized))
    custom_call_targets(exported)  # parses the module in jaxlib


if __name__ == "__main__":
    _main()
