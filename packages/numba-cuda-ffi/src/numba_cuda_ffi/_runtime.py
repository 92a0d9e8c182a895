"""numba-cuda and the GPU, reached lazily.

The package imports without numba-cuda and without a GPU; using it without
them raises an error that says what is missing and how to install it.
"""

from __future__ import annotations

import functools
from types import ModuleType

from ffi_core.bridge import install_hint
from ffi_core.bridge.cuda import cuda_devices

__all__ = ["INSTALL_HINT", "cuda_devices", "numba_cuda"]

#: How to get numba-cuda with its CUDA compiler libraries.
INSTALL_HINT = (
    f"{install_hint('numba-cuda-ffi[cu13]')} for CUDA 13, or the same with "
    '"numba-cuda-ffi[cu12]" for CUDA 12; these bring `numba-cuda[cu13]` / `numba-cuda[cu12]`'
)


@functools.cache
def numba_cuda() -> ModuleType:
    """``numba.cuda``, or an ImportError naming the install command."""
    try:
        from numba import cuda
    except ImportError as exc:
        raise ImportError(f"numba-cuda-ffi needs numba-cuda: {INSTALL_HINT}") from exc
    _check_numpy_support()
    return cuda


def _check_numpy_support() -> None:
    # numba-cuda 0.30 registers an overload of numpy.row_stack when its array
    # functions are imported, at the first compile; under NumPy 2.5, which
    # removed row_stack, every compile then fails with a bare AttributeError.
    try:
        import numba.cuda.np.arrayobj  # noqa: F401
    except AttributeError as exc:
        raise ImportError(numpy_mismatch_message(exc)) from exc


def numpy_mismatch_message(exc: BaseException) -> str:
    """The error for a numba-cuda that cannot run with the installed NumPy."""
    import numpy

    try:
        from importlib.metadata import version

        numba_cuda_version = version("numba-cuda")
    except Exception:
        numba_cuda_version = "(unknown version)"
    return (
        f"numba-cuda {numba_cuda_version} does not work with NumPy {numpy.__version__}: "
        f"it fails with {exc!s} when it compiles a kernel. Install a NumPy it supports "
        '(`pip install "numpy<2.5"`; in a uv project: `uv add "numpy<2.5"`), or a numba-cuda '
        "release made for this NumPy"
    )
