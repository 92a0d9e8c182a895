"""The exceptions every bridge shares: a compile failure, and a call placed on
a platform its kernel does not run on."""

from __future__ import annotations

__all__ = ["KernelCompileError", "WrongPlatformError"]


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


class WrongPlatformError(NotImplementedError):
    """A kernel call lowered for a platform its kernel does not run on (a CPU
    kernel placed on a GPU, a GPU kernel on the CPU); the message names the
    kernel and how to place its inputs. A NotImplementedError, and so also a
    RuntimeError, which each platform's lowering raised before.

    Example:
        >>> issubclass(WrongPlatformError, RuntimeError)
        True
    """


WrongPlatformError.__module__ = "ffi_core.bridge"
