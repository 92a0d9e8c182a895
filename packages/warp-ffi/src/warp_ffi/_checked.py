"""Bounds-checked Warp kernels: a private copy built in Warp's debug mode, run
first in a forked child.

Warp's debug mode (the module option ``mode="debug"``) compiles every array
access with a check of its indices. On the CPU a failed check prints
``Assertion failed: '<condition>'`` and stops the process (Warp's JIT binds
the check to its own ``_wp_assert``, which traps and aborts): nothing a
library can catch. So a bounds-checked handler runs the kernel first in a
child made with ``fork()``, whose writes land in its own copy of the memory:
when the child exits cleanly, every index was in range and the handler runs
the kernel again for real; when Warp's check stopped it, the handler returns
an FFI error naming the kernel with Warp's message. The cost is a fork and a
second run per call (measured in the README).

The copy lives in a module of its own, so the user's kernel and module
options (and ``wp.config``) stay as they are.
"""

from __future__ import annotations

import ctypes
import signal
import threading
from typing import Any

import numba
import numpy as np
from ffi_core.abi.native import call_void_fn, cstring, load, stack_buffer, store, voidptr
from numba import types

from ._warp import wp, wp_context

__all__ = ["MESSAGE_BYTES", "checked_copy", "probe"]

#: The bytes of Warp's message a handler keeps (the rest is cut).
MESSAGE_BYTES = 512

_lock = threading.Lock()
_copies: dict[Any, Any] = {}


def checked_copy(kernel: Any) -> Any:
    """``kernel`` (a kernel or an overload of a generic one) compiled in
    Warp's debug mode: a copy in a private module that has the options of
    the kernel's own, with ``mode="debug"``; made once per kernel."""
    with _lock:
        found = _copies.get(kernel)
        if found is not None:
            return found
        parent = getattr(kernel, "generic_parent", None)
        source = kernel if parent is None else parent
        module = wp_context.Module(f"warp_ffi_boundscheck.{source.key}", None)
        options: dict[str, Any] = module.options
        options.update(source.module.options, mode="debug")
        copy = wp.Kernel(source.func, key=source.key, module=module, options=dict(source.options))
        if parent is not None:
            copy = copy.add_overload([a.type for a in kernel.adj.args])
        _copies[kernel] = copy
        return copy


def _libc_function(name: str, restype: Any, *argtypes: Any) -> Any:
    # A function object of this module's own handle on the C library, so the
    # types set here are seen by no one else.
    function = getattr(_LIBC, name)
    function.restype = restype
    function.argtypes = argtypes
    return function


_LIBC = ctypes.CDLL(None)
_fork = _libc_function("fork", ctypes.c_int)
_pipe = _libc_function("pipe", ctypes.c_int, ctypes.c_void_p)
_dup2 = _libc_function("dup2", ctypes.c_int, ctypes.c_int, ctypes.c_int)
_close = _libc_function("close", ctypes.c_int, ctypes.c_int)
_open = _libc_function("open", ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
_read = _libc_function("read", ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t)
_waitpid = _libc_function("waitpid", ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
_setrlimit = _libc_function("setrlimit", ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
_exit = _libc_function("_exit", None, ctypes.c_int)
_signal = _libc_function("signal", ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)

#: The signals a failed check (or a crash) stops the child with. The child
#: restores their default action, so a handler the process installed (Python's
#: ``faulthandler``, which pytest turns on) does not report a stop the parent
#: expects and reports itself.
_STOPS = tuple(
    int(s) for s in (signal.SIGILL, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGSEGV)
)

#: ``RLIMIT_CORE``: the child that Warp's check stops writes no core file.
_RLIMIT_CORE = 4
#: ``O_WRONLY``.
_O_WRONLY = 1
#: ``EINTR``: a ``waitpid``/``read`` interrupted by a signal is retried.
_RETRIES = 1000


@numba.njit(cache=False)
def probe(fn, message, bounds, args, adj, backward):  # pragma: no cover - native
    """Run entry point ``fn`` (forward: ``(bounds, args)``; backward: with
    ``adj`` too) in a forked child; 0 when it exited cleanly, else the
    address ``message`` (``MESSAGE_BYTES`` zeroed bytes) holding the first
    line of Warp's report."""
    fds = stack_buffer(8)
    if _pipe(voidptr(fds)) != 0:
        return _copy_text(message, cstring("cannot run the bounds check: pipe() failed"))
    read_end = load(fds, types.int32)
    write_end = load(fds + 4, types.int32)
    pid = _fork()
    if pid == 0:  # the child: no core file, stdout dropped, stderr to the pipe
        _setrlimit(_RLIMIT_CORE, voidptr(stack_buffer(16)))
        for stop in _STOPS:
            _signal(stop, voidptr(0))  # SIG_DFL
        null = _open(voidptr(cstring("/dev/null")), _O_WRONLY)
        if null >= 0:
            _dup2(null, 1)
        _dup2(write_end, 2)
        if backward:
            call_void_fn(fn, (bounds, args, adj))
        else:
            call_void_fn(fn, (bounds, args))
        _exit(0)
    _close(write_end)
    if pid < 0:
        _close(read_end)
        return _copy_text(message, cstring("cannot run the bounds check: fork() failed"))
    n = 0
    for _ in range(_RETRIES):  # read to the end (or MESSAGE_BYTES - 1 bytes)
        got = _read(read_end, voidptr(message + n), MESSAGE_BYTES - 1 - n)
        if got == 0 or n >= MESSAGE_BYTES - 1:
            break
        if got > 0:
            n += got
    _close(read_end)
    status = stack_buffer(8)
    for _ in range(_RETRIES):  # retried when a signal interrupts it
        if _waitpid(pid, voidptr(status), 0) == pid:
            break
    if load(status, types.int32) == 0:  # exited with status 0
        return np.uintp(0)
    for i in range(n):  # the first line: Warp's failed condition
        if load(message + i, types.uint8) == 10:
            n = i
            break
    if n == 0:
        return _copy_text(message, cstring("the kernel stopped its process (no message)"))
    store(message + n, 0, types.uint8)
    return message


@numba.njit(inline="always", cache=False)
def _copy_text(dst, src):  # pragma: no cover - native
    for i in range(MESSAGE_BYTES - 1):
        c = load(src + i, types.uint8)
        store(dst + i, c, types.uint8)
        if c == 0:
            break
    return dst
