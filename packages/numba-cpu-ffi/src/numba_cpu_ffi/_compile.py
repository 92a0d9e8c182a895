"""Compile a kernel once per (dtypes, ranks): the private dispatcher the
shared handlers call through its address.

The kernel is compiled as a private dispatcher of its function, with its
options and locals, without the Python and C wrappers Numba adds to a user's
dispatcher (those stay resident for the life of the process and no handler
calls them: about 1 MB per kernel, ``tools/bench_kernel_memory.py``). A
``parallel=True`` kernel is compiled serially first (``prange`` as
``range``), which every small call runs; its parallel form only when a call
holds enough work to wake threads. Compiled code is kept in the checked
cache (``ffi_core.abi.native``'s checked cache) under a name derived from the kernel's digest (its
code, globals, closure values and options), the argument types and the
versions: a kernel made in a factory or a closure is found again by the next
process, wherever its source file is and whatever its modification time.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
import sys
import threading
from typing import Any

import ffi_core
import jaxlib
import numba
import numpy as np
from ffi_core.abi.native import cache_dispatcher, compiled_address
from numba import types
from numba.core.errors import NumbaError
from numba.np.ufunc.parallel import _launch_threads

from ._cache import cache_layers
from ._spec import CallSig, KernelInfo
from ._version import __version__

__all__ = [
    "KernelCompileError",
    "batch_address",
    "kernel_address",
    "kernel_argtypes",
    "row_view",
    "versions",
]


class KernelCompileError(ffi_core.KernelCompileError):
    """A kernel that Numba cannot compile for the dtypes and ranks it is given
    (a TypeError, as every bridge's ``ffi_core.KernelCompileError``)."""


def versions() -> tuple[str, ...]:
    """What compiled code depends on besides its own source: the versions
    of Numba, llvmlite, jaxlib, this package and Python."""
    import llvmlite

    return (numba.__version__, llvmlite.__version__, jaxlib.__version__, __version__, sys.version)


def kernel_argtypes(sig: CallSig) -> tuple[Any, ...]:
    """The Numba types the kernel is called with for ``sig``: C-contiguous
    arrays (a batched call's rows: one rank less, 0-d for a rank-1 row, as
    an unbatched call's 0-d arrays)."""
    n_in = len(sig.inputs)
    result = []
    for k, arr in enumerate(sig.inputs + sig.outputs):
        dtype = numba.from_dtype(np.dtype(arr.dtype))
        row = sig.batched is not None and (k >= n_in or sig.batched[k])
        result.append(types.Array(dtype, arr.rank - 1 if row else arr.rank, "C"))
    return tuple(result)


def row_view(name: str, rank: int) -> str:
    """Numba source for row ``b`` of array ``name`` of ``rank``, as a batched
    call passes it to the kernel: a view one rank less, 0-d for a rank-1
    array (where ``name[b]`` would be a scalar the kernel cannot write)."""
    return f"{name}[b:b + 1].reshape(())" if rank == 1 else f"{name}[b]"


def _base(
    info: KernelInfo,
    argtypes: tuple[Any, ...],
    parallel: bool,
    boundscheck: bool,
    *form: str,
) -> str:
    h = hashlib.sha256()
    parts = (info.digest, repr(argtypes), repr(parallel), repr(boundscheck), *form, *versions())
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    name = re.sub(r"[^A-Za-z0-9_]", "_", info.name)[:40]
    return f"k_{name}_{h.hexdigest()[:24]}"


_lock = threading.Lock()
#: The dispatchers whose code handlers call: kept for the life of the process.
_dispatchers: list[Any] = []


def kernel_address(info: KernelInfo, sig: CallSig, parallel: bool) -> int:
    """The address of ``info``'s kernel compiled for the arguments of
    ``sig`` (its parallel form when ``parallel``, else its serial one), as
    ``ffi_core.abi.native.call_guarded_at`` calls it, once per process; loaded
    from the cache layers (``cache_layers``) when it was compiled before,
    and saved in the user's cache otherwise.

    Raises:
        KernelCompileError: Numba cannot compile the kernel for these types.
    """
    try:
        return _compiled(info, kernel_argtypes(sig), parallel, sig.boundscheck)
    except NumbaError as exc:
        raise KernelCompileError(
            f"kernel '{info.name}' does not compile for {sig.describe()}:\n{exc}"
        ) from None


@functools.cache
def _compiled(
    info: KernelInfo, argtypes: tuple[Any, ...], parallel: bool, boundscheck: bool
) -> int:
    kernel = info.kernel
    options = _options(info, boundscheck)
    options.update(no_cpython_wrapper=True, no_cfunc_wrapper=True)
    if not parallel:
        options["parallel"] = False
    dispatcher = numba.njit(locals=dict(kernel.locals), **options)(kernel.py_func)
    _cached(info, dispatcher, _base(info, argtypes, parallel, boundscheck))
    with _lock:
        if parallel:
            # Cached parallel code needs the threading layer started before it loads.
            _launch_threads()
        dispatcher.compile(argtypes)
        if dispatcher.overloads[argtypes].signature.return_type != types.none:
            dispatcher = _returning_nothing(dispatcher, len(argtypes), options)
            dispatcher.compile(argtypes)
        _dispatchers.append(dispatcher)
    return compiled_address(dispatcher, argtypes)


def batch_address(info: KernelInfo, sig: CallSig) -> int:
    """The address of a function that runs ``info``'s kernel over every row
    of ``sig``'s batch, with the kernel inlined in its loop (0 where it
    cannot be made: a kernel with ``locals`` typing, whose names inlining
    renames, or one Numba cannot inline). Called as the kernel is
    (``call_guarded_at``), on the whole batched buffers: the rows cost no
    call each. Compiled once per process and cached like the kernel's forms.
    """
    if sig.batched is None or info.kernel.locals:
        return 0
    n_in = len(sig.inputs)
    # The whole batched buffers: the types of an unbatched call of these ranks.
    argtypes = kernel_argtypes(dataclasses.replace(sig, batched=None))
    rows = tuple(k >= n_in or sig.batched[k] for k in range(len(argtypes)))
    try:
        return _batch_compiled(info, argtypes, rows, n_in, sig.boundscheck)
    except NumbaError:
        return 0  # the row loop runs the kernel, whose own compile says what is wrong


def _batch_source(argtypes: tuple[Any, ...], rows: tuple[bool, ...], n_in: int) -> str:
    # The loop runs over the first output's rows, as the handler's row loop.
    names = [f"a{k}" for k in range(len(rows))]
    args = ", ".join(
        row_view(name, t.ndim) if row else name
        for name, t, row in zip(names, argtypes, rows, strict=True)
    )
    return (
        f"def batch({', '.join(names)}):\n"
        f"    for b in range({names[n_in]}.shape[0]):\n"
        f"        kernel({args})\n"
    )


@functools.cache
def _batch_compiled(
    info: KernelInfo,
    argtypes: tuple[Any, ...],
    rows: tuple[bool, ...],
    n_in: int,
    boundscheck: bool,
) -> int:
    kernel = info.kernel
    options = _options(info, boundscheck)
    options.pop("parallel", None)
    options.pop("inline", None)
    # Inlined as Numba IR, the kernel is typed and optimised with its loop:
    # with the loop's options, which are the kernel's own.
    inlined = numba.njit(inline="always", **options)(kernel.py_func)
    namespace: dict[str, Any] = {"__name__": kernel.py_func.__module__, "kernel": inlined}
    source = _batch_source(argtypes, rows, n_in)
    exec(source, namespace)
    options.update(no_cpython_wrapper=True, no_cfunc_wrapper=True)
    dispatcher = numba.njit(**options)(namespace["batch"])
    _cached(info, dispatcher, _base(info, argtypes, False, boundscheck, source))
    with _lock:
        dispatcher.compile(argtypes)
        _dispatchers.append(dispatcher)
    return compiled_address(dispatcher, argtypes)


def _options(info: KernelInfo, boundscheck: bool) -> dict[str, Any]:
    # The kernel's own Numba options, with bounds checks where asked.
    options = {k: v for k, v in info.kernel.targetoptions.items() if k != "nopython"}
    if boundscheck:
        options["boundscheck"] = True
    return options


def _cached(info: KernelInfo, dispatcher: Any, base: str) -> None:
    # Numba rebuilds cached code's environment from the kernel's module, which
    # must be this process's own; an address-bound value cannot be cached.
    if not info.address_bound and info.kernel.py_func.__module__ in sys.modules:
        cache_dispatcher(dispatcher, cache_layers(), base)


def _returning_nothing(dispatcher: Any, count: int, options: dict[str, Any]) -> Any:
    # Handlers call kernels that return nothing; a kernel that returns a value
    # is called through a function that drops it (the kernel's compiled code
    # is linked in, not compiled again).
    names = ", ".join(f"a{i}" for i in range(count))
    namespace: dict[str, Any] = {"kernel": dispatcher}
    exec(f"def returning_nothing({names}):\n    kernel({names})\n", namespace)
    wrapper_options = {k: v for k, v in options.items() if k != "parallel"}
    return numba.njit(**wrapper_options)(namespace["returning_nothing"])
