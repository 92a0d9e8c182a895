"""Which code makes a recipe step's target again: a fixed, declared set.

A blob only ever names a step's ``kind``, and the kind is only a key: the
rebuilder is one registered in this process (:func:`register_rebuilder`, by
code the process imported), or else one an installed package declares in the
entry-point group :data:`REBUILDER_ENTRY_POINTS` under the kind's name (this
workspace's bridges declare theirs there too: ffi-core imports no package
that depends on it). Any other kind is refused before anything is imported;
nothing the blob holds names a module.

A step may also carry the ``distribution`` that made it (written at export
from what its bridge declared with :func:`register_rebuilder`): read back,
it is checked to be a distribution name (``check_distribution``) and only
ever quoted in a message, saying what to install.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .._install import install_hint
from ._recipe import MAX_DISTRIBUTION, MissingKernelError, StepField, check_distribution

__all__ = [
    "REBUILDER_ENTRY_POINTS",
    "Rebuilder",
    "distribution_of",
    "rebuilder",
    "register_rebuilder",
]

#: The entry-point group in which a package declares a rebuilder: the entry
#: point's name is the step kind, its value the module that calls
#: :func:`register_rebuilder` for that kind when imported.
REBUILDER_ENTRY_POINTS = "ffi_core.rebuilders"

_KIND = re.compile(r"[A-Za-z_][\w.]{0,127}", re.ASCII)


@dataclasses.dataclass(frozen=True)
class Rebuilder:
    """A registered rebuilder and the fields its steps hold (None: unchecked)."""

    rebuild: Callable[[Mapping[str, Any]], None]
    fields: Mapping[str, StepField] | None
    distribution: str | None = None


_lock = threading.Lock()
_rebuilders: dict[str, Rebuilder] = {}


def register_rebuilder(
    kind: str,
    rebuild: Callable[[Mapping[str, Any]], None],
    *,
    fields: Mapping[str, StepField] | None = None,
    distribution: str | None = None,
) -> None:
    """``rebuild(step)`` makes again what a recipe step of ``kind`` made, in a
    new process; it raises :class:`MissingKernelError` when the kernel is not
    known there. A bridge registers its rebuilder when it is imported.

    ``deserialize`` finds the rebuilder of a kind among those registered and
    the entry points of the group ``ffi_core.rebuilders`` (named by kind); it
    never imports a module a blob names.

    Args:
        kind: the ``"kind"`` of the steps (letters, digits, ``_`` and ``.``).
        rebuild: called with the step's fields, decoded and checked.
        fields: what each field of a step holds (besides ``kind``); a step
            read from a blob with a missing, extra or refused field raises
            ``ExportError`` naming it before ``rebuild`` sees it. None: the
            fields are only checked to be recipe data, and ``rebuild`` checks
            their types and ranges itself.
        distribution: the distribution that provides the rebuilder
            (``"numba-cpu-ffi"``): ``serialize`` writes it into each step of
            ``kind``, so that a process without it is told what to install.
            None: not written.

    Example:
        >>> register_rebuilder(
        ...     "toy.double", lambda step: None, fields={"rank": StepField.integer(0, 8)}
        ... )
    """
    if not isinstance(kind, str) or not _KIND.fullmatch(kind):
        raise ValueError(
            "`kind` must be a str of ASCII letters, digits, '_' and '.' (at most 128, not "
            f"starting with a digit or '.'), got {kind!r}"
        )
    if not callable(rebuild):
        raise TypeError(f"`rebuild` must be callable, got {type(rebuild)!r}")
    if fields is not None and not (
        isinstance(fields, Mapping)
        and all(isinstance(k, str) and isinstance(v, StepField) for k, v in fields.items())
    ):
        raise TypeError(
            f"`fields` must be None or a mapping of str to ffi_core.export.StepField, got {fields!r}"
        )
    if distribution is not None and not check_distribution(distribution):
        raise ValueError(
            "`distribution` must be None or a distribution name (ASCII letters and digits, "
            f"with '.', '_' or '-' inside; at most {MAX_DISTRIBUTION}), got {distribution!r}"
        )
    with _lock:
        _rebuilders[kind] = Rebuilder(
            rebuild, None if fields is None else dict(fields), distribution
        )


def distribution_of(kind: str) -> str | None:
    """The distribution the rebuilder of ``kind`` registered with, if any."""
    found = _registered(kind)
    return None if found is None else found.distribution


def _registered(kind: str) -> Rebuilder | None:
    with _lock:
        return _rebuilders.get(kind)


def _declared(kind: str) -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=REBUILDER_ENTRY_POINTS, name=kind))


def _known_kinds() -> list[str]:
    declared = {
        point.name for point in importlib.metadata.entry_points(group=REBUILDER_ENTRY_POINTS)
    }
    with _lock:
        return sorted({*declared, *_rebuilders})


def rebuilder(kind: str, distribution: str | None = None) -> Rebuilder:
    """The rebuilder of ``kind`` (a key only), loading the entry point that
    declares it; MissingKernelError when there is none, saying to install
    ``distribution`` (the step's, checked: only quoted) where it is given."""
    found = _registered(kind)
    if found is not None:
        return found
    points = _declared(kind)
    if not points:
        if distribution is not None:
            raise MissingKernelError(
                f"its kernel was made by the distribution {distribution!r}, which provides no "
                f"rebuilder here (no entry point {kind!r} of the group "
                f"{REBUILDER_ENTRY_POINTS!r} is declared); {install_hint(distribution)}"
            )
        raise MissingKernelError(
            f"no rebuilder for recipe steps of kind {kind!r}: install the package that "
            f"provides kind {kind!r} (this process knows {_known_kinds()}); a package adds one "
            f"with ffi_core.export.register_rebuilder, or declares it as an entry point named "
            f"{kind!r} in the group {REBUILDER_ENTRY_POINTS!r}"
        )
    for point in points:
        try:
            point.load()
        except Exception as exc:
            raise MissingKernelError(
                f"the entry point {point.name!r} = {point.value!r} of the group "
                f"{REBUILDER_ENTRY_POINTS!r} failed to load: {type(exc).__name__}: {exc}"
            ) from exc
    found = _registered(kind)
    if found is None:
        raise MissingKernelError(
            f"no rebuilder for recipe steps of kind {kind!r}: the entry point {kind!r} of the "
            f"group {REBUILDER_ENTRY_POINTS!r} did not register one"
        )
    return found
