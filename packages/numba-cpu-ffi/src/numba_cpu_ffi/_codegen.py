"""Generate, compile and cache the native handler for one (kernel, signature).

The handler is a Numba ``cfunc`` that XLA calls directly, from ffi-core's one
CPU template (``ffi_core.cpu``): it answers the metadata handshake, checks the
buffers' count, dtypes and ranks and wraps each buffer as an array whose shape
comes from the call frame; what is numba's here (``handler_body``) is the call
of the kernel through ``call_guarded``, so that a raised exception becomes an
FFI error, and the choice of threads.

Handlers are written to a source file named by a digest of the kernel and the
signature and their machine code is kept in the same checked directory
(``_disk_cache``), so a later process loads it instead of compiling again.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pathlib
import sys
import tempfile
import threading
import types as pytypes
from typing import Any

import ffi_core
import ffi_core.cpu
import jaxlib
import numba
from ffi_core import Unexportable, api_version, cache_root, checked_cache_dir, target_name
from ffi_core.cpu import CpuPlan, HandlerBody, HandlerSpec, handler_globals, handler_source
from numba.core.errors import NumbaError
from numba.np.ufunc.parallel import _launch_threads

from ._disk_cache import cached_cfunc, cached_njit
from ._spec import CallSig, KernelInfo
from ._version import __version__

__all__ = [
    "KernelCompileError",
    "cache_dir",
    "compiled_handler",
    "ensure_target",
    "handler_body",
    "handler_spec",
    "parallel_min_elements",
    "plan",
]

_CACHE_ENV = "NUMBA_CPU_FFI_CACHE_DIR"


class KernelCompileError(ffi_core.KernelCompileError):
    """A kernel that Numba cannot compile for the dtypes and ranks it is given
    (a TypeError, as every bridge's ``ffi_core.KernelCompileError``)."""


def cache_dir() -> pathlib.Path | None:
    """Where generated handlers and their compiled code are kept, or None when
    there is no disk cache (handlers are then compiled in every process).

    ``$NUMBA_CPU_FFI_CACHE_DIR`` wins (empty: no disk cache); otherwise
    ``$XDG_CACHE_HOME/numba-cpu-ffi`` (``~/.cache/numba-cpu-ffi``). The
    directory is created with mode 0700; one that is a symlink, is not owned
    by the current user or may be written by group or others is refused with
    an ``ffi_core.CacheDirWarning`` (None), since compiled code and pickles
    are loaded from it.
    """
    explicit = os.environ.get(_CACHE_ENV)
    if explicit == "":
        return None
    path = pathlib.Path(explicit) if explicit is not None else cache_root() / "numba-cpu-ffi"
    return checked_cache_dir(path, purpose=f"numba-cpu-ffi's handler cache (${_CACHE_ENV})")


def handler_spec(info: KernelInfo, sig: CallSig) -> HandlerSpec:
    """The buffers the handler of ``info``'s kernel for ``sig`` checks."""
    label = f"numba kernel '{info.name}'"
    if sig.context:
        label += f" ({sig.context})"
    return HandlerSpec(label, sig.inputs, sig.outputs, sig.batched, int(sig.hint))


def handler_body(info: KernelInfo, sig: CallSig) -> HandlerBody:
    """How the handler calls the kernel, on the buffers' views: through
    ``call_guarded``, so that a raised exception becomes an FFI error naming
    the kernel. A parallel kernel wakes its threads only for enough work; the
    rows of a batch run across threads, each with the serial kernel."""
    n_in, n_arrays = len(sig.inputs), len(sig.inputs) + len(sig.outputs)
    views = [f"v_{k}" for k in range(n_arrays)]
    threshold = parallel_min_elements()
    imports = ("from ffi_core.native import call_guarded",)
    if sig.batched is not None:
        sliced = [f"{v}[b]" if k >= n_in or sig.batched[k] else v for k, v in enumerate(views)]
        args = f"api, name, ({', '.join(sliced)},))"
        serial_row = (f"error = call_guarded(serial, {args}",)
        return HandlerBody(
            call=(),
            row=serial_row,
            # One row: the kernel's own threads.
            heavy_row=(f"error = call_guarded(kernel, {args}",) if info.parallel else None,
            row_args=tuple(views),
            imports=imports,
            threads=threshold,
            views=True,
        )
    call = f"call_guarded(kernel, api, name, ({', '.join(views)},))"
    if not info.parallel:
        return HandlerBody(call=(f"return {call}",), imports=imports, views=True)
    return HandlerBody(
        call=(
            f"if work >= {threshold}:",
            f"    return {call}",
            f"return call_guarded(serial, api, name, ({', '.join(views)},))",
        ),
        imports=imports,
        threads=threshold,
        views=True,
    )


#: Waking a parallel kernel's threads costs about this much (measured with
#: tools/bench_numba_cpu.py's ``parallel_threshold`` group: 14 µs on 2 cores
#: when the workers are warm, several times that under XLA, where they sleep).
_WAKE_S = 30e-6
#: What one element of a simple kernel costs on one core (a memory-bound
#: elementwise loop: 0.2 ns per float32).
_ELEMENT_S = 0.2e-9


@functools.cache
def parallel_min_elements() -> int:
    """The fewest elements (of a call's largest buffer) for which a parallel
    kernel, or the batch loop of a vmapped call, runs in threads.

    Threads pay when the time they save, ``n * element * (1 - 1/threads)``,
    exceeds the time to wake them: about 300,000 elements on 2 threads,
    160,000 on 16. With one thread, never.

    Example:
        >>> parallel_min_elements() >= 100_000
        True
    """
    # numba.config sets its options at import, so its types do not declare them.
    threads: int = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]
    if threads <= 1:
        return 2**62
    return int(_WAKE_S / (_ELEMENT_S * (1 - 1 / threads)))


def _twins(kernel: Any) -> tuple[Any, Any]:
    """The kernel and its serial form (``prange`` as ``range``) as the handler
    calls them: private dispatchers of the kernel's function, with its options
    and locals, that Numba compiles without the Python and C wrappers it adds
    to a user's dispatcher. Those wrappers stay resident for the life of the
    process and the handler never calls them: compiling the user's dispatcher
    instead cost about 1 MB per kernel (``tools/bench_kernel_memory.py``)."""
    options = {k: v for k, v in kernel.targetoptions.items() if k != "nopython"}
    options.update(no_cpython_wrapper=True, no_cfunc_wrapper=True)
    twin = numba.njit(locals=dict(kernel.locals), **options)(kernel.py_func)
    if not options.get("parallel"):
        return twin, twin
    options["parallel"] = False
    return twin, numba.njit(locals=dict(kernel.locals), **options)(kernel.py_func)


def _digest(info: KernelInfo, sig: CallSig) -> str:
    h = hashlib.sha256()
    for part in (
        info.digest,
        *sig.name_parts(),
        repr(parallel_min_elements()),
        numba.__version__,
        jaxlib.__version__,
        repr(api_version()),
        __version__,
        sys.version,
    ):
        h.update(part.encode())
    return h.hexdigest()[:24]


def _load_module(
    name: str, source: str, namespace: dict[str, Any], *, cache: bool = True
) -> pytypes.ModuleType:
    """Run ``source`` as module ``name`` with ``namespace`` preset; its
    ``compile_handler``/``compile_loop`` decorators keep compiled code in the
    cache directory when there is one."""
    directory = cache_dir() if cache else None
    module = pytypes.ModuleType(f"numba_cpu_ffi_handlers.{name}")
    module.__dict__.update(
        namespace,
        compile_handler=cached_cfunc(directory, source),
        compile_loop=cached_njit(directory, source),
    )
    if directory is None:
        exec(compile(source, f"<{name}>", "exec"), module.__dict__)
        return module
    path = directory / f"{name}.py"
    if not path.is_file() or path.read_text() != source:
        # The source beside its compiled code, for tracebacks and readers; it is
        # never imported (the text run is the one in memory). Written once,
        # atomically.
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    module.__file__ = str(path)
    # A cfunc loaded from Numba's cache does not start the threading layer that
    # parallel code linked into it needs (Numba gathers the reload hooks before
    # the cfunc's library is linked), and its symbols must exist before the
    # cached code is loaded; without this a prange crashes the process.
    _launch_threads()
    # Numba rebuilds a cached function's environment from its module, found
    # through sys.modules.
    sys.modules[module.__name__] = module
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    except BaseException:
        del sys.modules[module.__name__]
        raise
    return module


_lock = threading.Lock()


@functools.cache
def compiled_handler(info: KernelInfo, sig: CallSig) -> tuple[str, Any]:
    """``(target_name, cfunc)`` for ``info``'s kernel and ``sig``, compiled once
    per process (and loaded from disk where Numba's cache allows)."""
    digest = _digest(info, sig)
    spec = handler_spec(info, sig)
    kernel, serial = _twins(info.kernel)
    namespace = handler_globals(spec) | {"kernel": kernel, "serial": serial}
    source = handler_source(spec, handler_body(info, sig))
    with _lock:
        try:
            # A kernel reading ctypes/cffi functions (address-bound values) has
            # code Numba cannot cache; it would warn at every compile.
            module = _load_module(
                f"h_{info.name}_{digest}", source, namespace, cache=not info.address_bound
            )
        except NumbaError as exc:
            raise KernelCompileError(
                f"kernel '{info.name}' does not compile for {sig.describe()}:\n{exc}"
            ) from None
    return target_name(*_name(info, sig)), module.handler


def _name(info: KernelInfo, sig: CallSig) -> tuple[str, ...]:
    return (f"numba_cpu.{info.name}", info.digest, *sig.name_parts())


def plan(info: KernelInfo, sig: CallSig) -> CpuPlan:
    """The target of ``info``'s kernel for ``sig``, as ``ffi_core.cpu`` takes it."""
    prefix, *parts = _name(info, sig)
    return CpuPlan(
        prefix,
        tuple(parts),
        content=f"{info.qualname}:{info.digest}:{':'.join(sig.name_parts())}",
        build=lambda: compiled_handler(info, sig)[1],
        recipe=_recipe(info, sig),
    )


def ensure_target(info: KernelInfo, sig: CallSig) -> str:
    """Compile (or load) and register the handler; returns the target name."""
    return ffi_core.cpu.ensure_target(plan(info, sig))


def _recipe(info: KernelInfo, sig: CallSig) -> dict[str, Any] | Unexportable:
    """How ``ffi_core.deserialize`` makes this target again (``_catalog``)."""
    if info.address_bound:
        return Unexportable(
            f"numba kernel {info.qualname!r} captures values whose repr holds a memory "
            f"address ({'; '.join(info.address_bound)}), so its digest differs in every "
            "process; make them module constants of a stable repr (numbers, strings, "
            "tuples, arrays) or pass them as arguments"
        )
    return {
        "kind": "numba_cpu",
        "module": "numba_cpu_ffi",
        "kernel": info.qualname,
        "digest": info.digest,
        **sig.to_step(),
    }
