"""Moved to :mod:`ffi_core.abi.native`: each name of it still resolves here, with
a DeprecationWarning naming the new place."""

from .._install import missing as _missing
from .._moved import moved_getattr as _moved_getattr

try:
    import numba as _numba  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise _missing("numba", needed_by=__name__, requirement="ffi-core[native]") from exc

from ..abi import native as _native

# Every name of the last release's ffi_core.native -> the module that holds it now.
_MOVED: dict[str, str] = dict.fromkeys(_native.__all__, "ffi_core.abi.native")

__all__ = sorted(_MOVED)

__getattr__ = _moved_getattr(__name__, _MOVED)
