"""Adapters for what kernel generators of particular backends may return."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._entry import KernelEntry
    from ._kernel import XLACustomKernel

__all__ = ["adapt_numba"]


def adapt_numba(kernel: XLACustomKernel, entry: KernelEntry, fn: Any, outs: Any) -> Any:
    """Wrap a bare ``@numba.njit`` function with ``numba_kernel``; its run-time
    errors then name the operation, the backend and how to switch."""
    try:
        from numba.core.registry import CPUDispatcher
    except ImportError:  # numba absent: fn cannot be a dispatcher
        return fn
    if not isinstance(fn, CPUDispatcher):
        return fn
    try:
        from numba_cpu_ffi import numba_kernel
    except ImportError as exc:
        raise ImportError(
            'numba kernels need numba-cpu-ffi; install it with: uv add "xla-custom-kernel[numba]"'
        ) from exc
    context = (
        f"kernel {kernel.name!r}, backend {entry.backend!r} on {entry.platform}; "
        f"{kernel.switch_hint(entry.platform, entry.backend)}"
    )
    return numba_kernel(fn, outs, error_context=context)
