"""The one exception every bridge's compile failure derives from."""

from __future__ import annotations

__all__ = ["KernelCompileError"]


class KernelCompileError(TypeError):
    """A kernel that its language's compiler cannot compile for the dtypes,
    ranks or parameters it is given.

    Every bridge's compile error subclasses it (numba-cpu-ffi's and Warp's
    ``KernelCompileError``, ``triton_ffi.TritonCompileError``,
    ``cuda_source_ffi.NvrtcCompileError``), so one ``except`` catches a
    compile failure of any bridge. A TypeError, as a kernel that does not
    compile for its arguments' types is a wrong-type error.

    Example:
        >>> class MyCompileError(KernelCompileError):
        ...     pass
        >>> try:
        ...     raise MyCompileError("kernel 'f': no float16")
        ... except KernelCompileError as exc:
        ...     print(exc)
        kernel 'f': no float16
    """


# Shown as ``ffi_core.KernelCompileError`` (its public name) in tracebacks,
# ``help()`` and the bridges' API snapshots, where it is a base class.
KernelCompileError.__module__ = "ffi_core"
