"""Reading what :func:`ffi_core.serialize` wrote: the blob checked (and its
signature verified, given a key), the payload's module checked or parsed in a
child process, then each target's recipe run by the rebuilder its kind names
among those this process declares (see ``_export``)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterable
from typing import Any

import jax

from .._registry import registered_targets
from ._blob import check_key, unpack
from ._export import _lock, accept_kernel, custom_call_targets, kernels_accepted
from ._payload import check_bytecode, parse_isolated
from ._rebuilders import rebuilder
from ._recipe import ExportError, MissingKernelError, check_step

__all__ = ["UnsignedBlobWarning", "deserialize"]

_warned = threading.Event()  # the UnsignedBlobWarning was given in this process


class UnsignedBlobWarning(UserWarning):
    """:func:`deserialize` read a blob that is not signed, without a ``key``
    (said once per process)."""


def deserialize(
    blob: bytes | bytearray,
    *,
    kernels: Iterable[object] = (),
    key: bytes | None = None,
    isolate: bool = False,
) -> jax.export.Exported:
    """The ``jax.export.Exported`` that :func:`serialize` wrote, with every
    kernel it calls registered in this process.

    **A blob is a program, like a pickle: deserialize only blobs you trust.**
    It holds a compiled function that runs with the rights of this process,
    and jaxlib's native reader parses its module; a crafted blob can make it
    abort the process. To trust a blob, sign it (``serialize(exported,
    key=key)``) and give the same ``key`` here: a blob that is not signed, or
    not signed with ``key`` (changed after signing), is refused before any of
    its bytes reaches jaxlib. Without ``key``, an unsigned blob is read with a
    :class:`UnsignedBlobWarning` (once per process), and a signed one is
    checked against its checksum only.

    The blob is checked before anything reads it: its format version, its
    lengths and its checksum, its signature (with ``key``), then the recipes
    against their schema (and each step against the fields its rebuilder
    declares, per-input lists such as ``batched`` against the inputs), then
    the framing of the payload's module. A step's rebuilder is
    found by its kind among those registered and the entry points of the group
    ``ffi_core.rebuilders`` (where this workspace's bridges declare theirs);
    nothing in the blob names a module to import. Each kernel is then found by
    the digest of its code among those this process knows: wrapped
    by its bridge in a module it imported,
    or passed in ``kernels``.

    Args:
        blob: what :func:`serialize` returned (``jax.export``'s own bytes are
            read by ``jax.export.deserialize``). Blobs of the previous format
            (2, unsigned) are read too.
        kernels: kernels to make known first: kernel objects the imported
            bridges accept (each bridge says which, when it registers with
            ``register_kernel_acceptor``).
        key: the key the blob was signed with; None reads it without
            verifying who wrote it.
        isolate: parse the payload in a child process first (a second or so),
            so that a payload jaxlib cannot read is an ``ExportError`` and
            never aborts this process. For blobs you cannot verify with a key.

    Raises:
        ExportError: the blob is corrupt or truncated, of another format, not
            signed or not signed with ``key``, holds a recipe that breaks its
            schema, or a payload that cannot be read; the message names the
            field or the reason.
        MissingKernelError: a kernel the function calls is not known here; the
            message names it and says what to import.
    """
    if not isinstance(blob, bytes | bytearray):
        raise TypeError(f"`blob` must be bytes from ffi_core.serialize, got {type(blob)!r}")
    if isinstance(kernels, str | bytes | bytearray) or not isinstance(kernels, Iterable):
        raise TypeError(
            f"`kernels` must be an iterable of kernel objects ({kernels_accepted()}), "
            f"got {type(kernels)!r}"
        )
    key = check_key(key)
    if not isinstance(isolate, bool):
        raise TypeError(f"`isolate` must be a bool, got {type(isolate)!r}")
    for k, obj in enumerate(kernels):
        if not accept_kernel(obj):
            raise TypeError(
                f"`kernels[{k}]` is not a kernel any imported bridge knows: got {type(obj)!r} "
                f"({kernels_accepted()})"
            )
    unpacked = unpack(blob, key)
    if key is None and not unpacked.signed:
        _warn_unsigned()
    if isolate:
        parse_isolated(unpacked.payload)
    try:
        exported = jax.export.deserialize(unpacked.payload)
    except Exception as exc:
        raise ExportError(
            f"the blob's JAX payload cannot be read: {type(exc).__name__}: {exc}"
        ) from exc
    check_bytecode(bytes(exported.mlir_module_serialized))
    for target in custom_call_targets(exported):
        chains = unpacked.targets.get(target)
        if chains:
            _rebuild(target, chains)
    return exported


def _warn_unsigned() -> None:
    with _lock:
        if _warned.is_set():
            return
        _warned.set()
    warnings.warn(
        "ffi_core.deserialize read a blob that is not signed. A blob is a program, like a "
        "pickle: read only blobs you trust; sign them with serialize(exported, key=key) "
        "and read them with deserialize(blob, key=key) to have them verified (this "
        "warning is given once per process)",
        UnsignedBlobWarning,
        stacklevel=3,
    )


def _registered(target: str) -> bool:
    return any(name == target for name, _ in registered_targets())


def _run(step: dict[str, Any], where: str) -> None:
    found = rebuilder(step["kind"], step.get("distribution"))
    check_step(step, found.fields, where)
    try:
        found.rebuild(step)
    except (MissingKernelError, ExportError):
        raise
    except Exception as exc:
        # Whatever the step holds that its fields let through, a failure to act
        # on it is the blob's: said as such, never a crash of the caller.
        raise ExportError(
            f"recipe step `{where}` (kind {step['kind']!r}) cannot be run: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _rebuild(target: str, chains: list[list[dict[str, Any]]]) -> None:
    if _registered(target):
        return
    missing: list[str] = []
    for i, chain in enumerate(chains):
        try:
            for j, step in enumerate(chain):
                _run(step, f"targets[{target!r}][{i}][{j}]")
        except MissingKernelError as exc:
            missing.append(str(exc))
            continue
        if _registered(target):
            return
        missing.append(f"its recipe ran but did not register {target!r}")
    raise MissingKernelError(
        f"the exported function calls FFI target {target!r}, which this process cannot "
        f"make: {' Or: '.join(dict.fromkeys(missing))}"
    )
