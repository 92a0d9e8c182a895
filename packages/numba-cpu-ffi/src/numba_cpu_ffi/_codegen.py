"""The native handlers of numba kernels: one per call shape, shared by every
kernel of that shape, and a target per (kernel, signature) bound to it.

A handler is a Numba ``cfunc`` that XLA calls directly, from ffi-core's one
CPU template (``ffi_core.bridge.cpu``): it answers the metadata handshake, checks
the buffers' count, dtypes and ranks and wraps each buffer as an array whose
shape comes from the call frame. What is numba's here (``handler_body``) is
the call of the kernel through ``call_guarded_at`` (a raised exception
becomes an FFI error naming the kernel) and the choice of threads.

The handler does not link the kernel in: it reads the kernel's compiled
address from the target's record (``ffi_core.bridge.cpu.HandlerRecord``: word 0 the
serial form, word 1 the parallel form of a ``parallel=True`` kernel, word 2
of a batched call the kernel's batch loop, each compiled once a call needs
it), so one handler serves every kernel of the same dtypes,
ranks and batching, and a new kernel costs its own compile
(``_compile``) and a two-instruction entry point (``ffi_core.bridge.cpu.bind_record``).
Handlers are cached on disk by a digest of their source, like kernels.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import tempfile
import threading
from typing import Any

import numba
from ffi_core.abi import api_version
from ffi_core.abi.native import (
    Layers,
    cached_cfunc,
    cached_njit,
    compiled_address,
    handler_module,
    handler_name,
)
from ffi_core.bridge import ArraySig, target_name
from ffi_core.bridge.cpu import (
    BoundHandler,
    CpuPlan,
    HandlerBody,
    HandlerRecord,
    HandlerSpec,
    bind_record,
    cpu_handler_source,
    cpu_threaded_loop_source,
    handler_globals,
)
from ffi_core.export import Unexportable
from numba import types
from numba.np.ufunc.parallel import _launch_threads

from ._cache import cache_layers
from ._compile import batch_address, kernel_address, kernel_argtypes, row_view, versions
from ._spec import CallSig, KernelInfo

__all__ = [
    "batch_pays",
    "compiled_handler",
    "handler_body",
    "handler_label",
    "parallel_min_elements",
    "prepare_handler",
    "shared_handler",
    "target_plan",
    "threaded_loop_address",
]

#: The record's words: the serial kernel, the parallel one and, for a
#: batched call, the kernel's batch loop and the call shape's loop of threads
#: over the rows (each 0 until built).
_SERIAL, _PARALLEL, _BATCH, _THREADED = 0, 1, 2, 3


def _words(sig: CallSig) -> int:
    return 4 if sig.batched is not None else 2


def handler_label(info: KernelInfo, sig: CallSig) -> str:
    """What the messages of ``info``'s handler for ``sig`` start with."""
    return f"{info.label} ({sig.context})" if sig.context else info.label


def handler_body(sig: CallSig, parallel: bool) -> HandlerBody:
    """How the shared handler of ``sig``'s shape calls a kernel, on the
    buffers' views, through ``call_guarded_at`` at the address in the
    record: the serial form (``word_0``), or for a ``parallel`` kernel its
    parallel form (``word_1``) when the call holds enough work to wake
    threads and that form is built. The rows of a batch run across threads,
    each with the serial form, in the call shape's loop of threads
    (``word_3``, compiled apart once a call needs it:
    ``threaded_loop_address``); a batch with too little work for threads
    runs in one call of the kernel's batch loop (``word_2``) once built, else
    row by row in the handler."""
    n_in, n_arrays = len(sig.inputs), len(sig.inputs) + len(sig.outputs)
    views = [f"v_{k}" for k in range(n_arrays)]
    threshold = parallel_min_elements()
    serial, fast = f"word_{_SERIAL}", f"word_{_PARALLEL}"
    if sig.batched is not None:
        arrays = sig.inputs + sig.outputs
        sliced = [
            row_view(v, arrays[k].rank) if k >= n_in or sig.batched[k] else v
            for k, v in enumerate(views)
        ]
        args = f"api, name, ({', '.join(sliced)},))"
        batch = f"word_{_BATCH}"
        return HandlerBody(
            call=(),
            batch_call=(
                f"if {batch} != 0 and (work < {threshold} or {serial} == 0):",
                f"    return call_guarded_at({batch}, api, name, ({', '.join(views)},))",
            ),
            row=(f"error = call_guarded_at({serial}, {args}",),
            # One row with enough work: the kernel's own threads, once built.
            heavy_row=(f"error = call_guarded_at(heavy, {args}",) if parallel else None,
            setup=(f"heavy = {fast} if {fast} != 0 else {serial}",) if parallel else (),
            row_args=(serial, *(("heavy",) if parallel else ()), *views),
            threads=threshold,
            threaded_loop=f"word_{_THREADED}",
            views=True,
        )
    call = f"call_guarded_at({serial}, api, name, ({', '.join(views)},))"
    if not parallel:
        return HandlerBody(call=(f"return {call}",), views=True)
    # A parallel kernel's record holds the forms its calls needed so far: the
    # parallel one alone for a target only ever called with enough work.
    return HandlerBody(
        call=(
            f"if {serial} == 0 or (work >= {threshold} and {fast} != 0):",
            f"    return call_guarded_at({fast}, api, name, ({', '.join(views)},))",
            f"return {call}",
        ),
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


def _load_module(name: str, source: str, namespace: dict[str, Any], layers: Layers) -> Any:
    """Run ``source`` as module ``name`` with ``namespace`` preset; its
    ``compile_handler``/``compile_loop`` decorators keep compiled code in
    ``layers``."""
    compilers = {
        "compile_handler": cached_cfunc(layers, f"{name}.handler"),
        "compile_loop": cached_njit(layers, f"{name}.batch_loop"),
    }
    path = layers.write / f"{name}.py" if layers.write is not None else None
    filename = str(path) if path is not None else f"<{name}>"
    # A cfunc loaded from Numba's cache does not start the threading layer that
    # parallel code linked into it needs (Numba gathers the reload hooks before
    # the cfunc's library is linked), and its symbols must exist before the
    # cached code is loaded; without this a prange crashes the process.
    _launch_threads()
    module = handler_module(
        f"numba_cpu_ffi_handlers.{name}", source, {**namespace, **compilers}, filename
    )
    if path is not None and not module.handler._cache_hits:
        # Compiled here: its source beside its compiled code, for tracebacks
        # and readers; it is never imported (the text run is the one in memory).
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                f.write(source)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache
    return module


_lock = threading.Lock()


def _spec(sig: CallSig, parallel: bool) -> HandlerSpec:
    # What the handler of ``sig``'s call shape checks: with or without the
    # cost hint of large calls (one more input, ignored).
    kind = "parallel numba kernels" if parallel else "numba kernels"
    return HandlerSpec(
        f"{kind} of {sig.describe()}",
        sig.inputs,
        sig.outputs,
        sig.batched,
        extra_inputs=1,
        record_words=_words(sig),
        extra_optional=True,
    )


@functools.cache
def shared_handler(
    inputs: tuple[ArraySig, ...],
    outputs: tuple[ArraySig, ...],
    batched: tuple[bool, ...] | None,
    parallel: bool,
) -> Any:
    """The handler (a ``cfunc`` of ``uintp(frame, record)``) of every kernel
    called with these buffers, with or without the cost hint of large calls
    (one more input, ignored), compiled once per process and cached on disk."""
    sig = CallSig(inputs, outputs, batched)
    spec = _spec(sig, parallel)
    source = cpu_handler_source(spec, handler_body(sig, parallel))
    name = handler_name("s_", source, (*versions(), repr(api_version())))
    with _lock:
        module = _load_module(name, source, handler_globals(spec), cache_layers())
    return module.handler


#: The loops of threads handlers call, by call shape: kept for the life of the process.
_loops: list[Any] = []


@functools.cache
def threaded_loop_address(
    inputs: tuple[ArraySig, ...],
    outputs: tuple[ArraySig, ...],
    batched: tuple[bool, ...],
    parallel: bool,
) -> int:
    """The address of the loop that runs the rows of a batched call of these
    buffers across threads (``ffi_core.bridge.cpu.cpu_threaded_loop_source``),
    as the shared handler calls it: compiled once per process, only when a
    call holds enough work for threads (a ``prange`` loop is most of a
    batched handler's compile), and cached on disk like the handler."""
    sig = CallSig(inputs, outputs, batched)
    spec = _spec(sig, parallel)
    source = cpu_threaded_loop_source(spec, handler_body(sig, parallel))
    name = handler_name("t_", source, (*versions(), repr(api_version())))
    # The handler's variables it is called with: api, name, work, n, the
    # address of the first error, the serial kernel (and the heavy form),
    # then every buffer whole.
    words = (types.uintp,) * (3 if parallel else 2)
    argtypes = (
        types.uintp,
        types.uintp,
        types.int64,
        types.int64,
        *words,
        *kernel_argtypes(dataclasses.replace(sig, batched=None)),
    )
    layers = cache_layers()
    # Cached parallel code needs the threading layer started before it loads.
    _launch_threads()
    with _lock:
        namespace = {
            **handler_globals(spec),
            "compile_loop": cached_njit(layers, f"{name}.threaded_loop"),
        }
        module_name = f"numba_cpu_ffi_handlers.{name}"
        loop = handler_module(module_name, source, namespace, f"<{module_name}>").threaded_loop
        loop.compile(argtypes)
        _loops.append(loop)
    return compiled_address(loop, argtypes)


def compiled_handler(info: KernelInfo, sig: CallSig) -> tuple[str, BoundHandler]:
    """``(target_name, entry point)`` for ``info``'s kernel and ``sig``: the
    shape's shared handler bound to a record holding, for an unbatched call
    of a serial kernel, the kernel's serial form (compiled here, or loaded
    from the cache). The forms of a ``parallel=True`` kernel and of a
    batched call are compiled as its calls need them (``prepare_handler``)."""
    handler = shared_handler(sig.inputs, sig.outputs, sig.batched, info.parallel)
    record = HandlerRecord(handler_label(info, sig), words=_words(sig))
    if not info.parallel and sig.batched is None:
        record[_SERIAL] = kernel_address(info, sig, False)
    return target_name(*_name(info, sig)), bind_record(handler, record)


def prepare_handler(
    info: KernelInfo, sig: CallSig, bound: BoundHandler, work: int | None, rows: int | None
) -> None:
    """The kernel's forms, as a lowered call of ``work`` elements in ``rows``
    rows needs them, each compiled once: a batch of many small rows with too
    little work for threads gets the kernel's batch loop (``batch_pays``);
    other batches and small calls get the serial form; a ``parallel=True``
    kernel's call of enough work gets its parallel form, and a batch of
    enough work in several rows the call shape's loop of threads. A call of
    unknown size (a target made again from an export recipe) gets the serial
    form, for a parallel kernel the parallel one, and for a batch the loop of
    threads."""
    record = bound.record
    threshold = parallel_min_elements()
    small = work is not None and work < threshold
    if sig.batched is not None and small and batch_pays(work or 0, rows):
        if record[_BATCH] == 0:
            record[_BATCH] = batch_address(info, sig)
        if record[_BATCH] != 0:
            return
    if sig.batched is not None or not info.parallel or work is None or small:
        if record[_SERIAL] == 0:
            record[_SERIAL] = kernel_address(info, sig, False)
    if info.parallel and not small:
        if record[_PARALLEL] == 0:
            record[_PARALLEL] = kernel_address(info, sig, True)
    if sig.batched is not None and not small and (rows is None or rows > 1):
        if record[_THREADED] == 0:
            record[_THREADED] = threaded_loop_address(
                sig.inputs, sig.outputs, sig.batched, info.parallel
            )


#: What a row of a batch costs beyond the kernel's own work in the handler's
#: row loop, a call of the kernel through its address: about 10 ns on this
#: machine (tools/bench_numba_cpu.py's vmap groups).
_ROW_CALL_S = 10e-9


def batch_pays(work: int, rows: int | None) -> bool:
    """Whether a batch of ``rows`` rows and ``work`` elements gains enough in
    the kernel's batch loop, against the handler's row loop, to pay for the
    loop's compile: when the rows' calls cost at least 5 µs a call (500
    rows) and at least a tenth of the work (rows of at most 500 elements).

    The batch loop compiles in about 30 ms more than the kernel alone, once
    per machine (it is cached on disk like the kernel); at 4096 rows of 16
    elements it saves about 30 µs a call (docs/performance.md).

    Example:
        >>> batch_pays(4096 * 16, 4096), batch_pays(64 * 1000, 64)
        (True, False)
    """
    if rows is None or rows <= 0:
        return False
    calls = rows * _ROW_CALL_S
    return calls >= 5e-6 and calls >= 0.1 * work * _ELEMENT_S


def _name(info: KernelInfo, sig: CallSig) -> tuple[str, ...]:
    return (f"numba_cpu.{info.name}", info.digest, *sig.name_parts())


def target_plan(planner: Any, info: KernelInfo, sig: CallSig) -> CpuPlan:
    """The target of ``info``'s kernel for ``sig``, as ``ffi_core.bridge.cpu``
    takes it; ``planner`` (a ``NumbaPlanner``) builds and prepares its handler."""
    prefix, *parts = _name(info, sig)
    return CpuPlan(
        prefix,
        tuple(parts),
        content=f"{info.qualname}:{info.digest}:{':'.join(sig.name_parts())}",
        recipe=_recipe(info, sig),
        planner=planner,
        sig=sig,
    )


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
