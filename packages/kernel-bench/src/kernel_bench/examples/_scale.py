"""How large the bundled suite's benchmark data is: one scale for the process."""

from __future__ import annotations

from typing import TypeVar

__all__ = ["SCALES", "get_scale", "set_scale", "sizes"]

T = TypeVar("T")

#: Sizes of the benchmark data: ``quick`` for a smoke run, ``default`` for a
#: run of well under a minute on two cores, ``full`` up to 10^5 neurons at 1 %
#: connectivity (10^8 non-zeros, several GB of memory).
SCALES = ("quick", "default", "full")
_scale = "default"


def set_scale(scale: str) -> None:
    """Choose the sizes the example benchmark data uses (one of :data:`SCALES`)."""
    global _scale
    if scale not in SCALES:
        raise ValueError(f"`scale` must be one of {', '.join(map(repr, SCALES))}, got {scale!r}")
    _scale = scale


def get_scale() -> str:
    """The scale set by :func:`set_scale` (``"default"`` initially)."""
    return _scale


def sizes(quick: list[T], default: list[T], full: list[T]) -> list[T]:
    # Looked up when the data is generated, not when a module is imported, so
    # that set_scale (called by the CLI after the import) takes effect.
    return {"quick": quick, "default": default, "full": full}[_scale]
