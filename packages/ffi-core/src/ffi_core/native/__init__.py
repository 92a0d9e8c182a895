"""Moved to :mod:`ffi_core.abi.native`: each name of it still resolves here, with
a DeprecationWarning naming the new place."""

from .._install import missing as _missing
from .._moved import moved_getattr as _moved_getattr

try:
    import numba as _numba  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise _missing("numba", needed_by=__name__, requirement="ffi-core[native]") from exc

from ..abi import native as _native

# Names ffi_core.abi.native gained after the move: only there.
_ADDED = frozenset(
    "HandlerCacheWarning Layers PORTABLE_CPUS array_view cache_dispatcher cached_cfunc "
    "cached_njit call_c handler_module handler_name load_at portable_cpus store_at".split()
)
# Every name of the last release's ffi_core.native -> the module that holds it now.
_MOVED: dict[str, str] = dict.fromkeys(
    (name for name in _native.__all__ if name not in _ADDED), "ffi_core.abi.native"
)

__all__ = sorted(_MOVED)

__getattr__ = _moved_getattr(__name__, _MOVED)
