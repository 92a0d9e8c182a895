"""Moved to :mod:`ffi_core.bridge.cuda`: each name here warns and forwards."""

from .._moved import moved_module

__moved_to__, _NAMES, __all__, __getattr__, __dir__ = moved_module(__name__)
