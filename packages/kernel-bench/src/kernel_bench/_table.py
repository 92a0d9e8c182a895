"""Kept for ``_autotune_record``, which imports ``render`` from here: tables are
drawn by ``_console`` (rich) now."""

from ._console import render as render

__all__ = ["render"]
