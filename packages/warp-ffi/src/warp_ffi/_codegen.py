"""Load the Warp module, bind one (kernel, signature) to the native handler of
its layout, and register it.

Warp compiles a kernel's Python module to machine code once (kept in Warp's
kernel cache on disk, so later processes load it) and exposes each kernel as C
entry points ``<name>_cpu_forward(bounds*, args*)`` and
``<name>_cpu_backward(bounds*, args*, adj_args*)``. The handler XLA calls is a
Numba ``cfunc`` from ffi-core's one CPU template (``ffi_core.bridge.cpu``: the
handshake, the buffer and attribute checks, the errors, the batch loop); what
is Warp's here (``handler_body``) fills Warp's launch-bounds and argument
structs on its stack from the call frame (array data, shape, strides; scalars
from the call's attributes) and calls the entry point whose address the
target's record holds (``HandlerRecord``). The handler's code holds no address
of the process, so kernels of one layout share it and it is cached on disk
(``handler_cache_dir``). No Python and no GIL per call; one registration
serves every shape.
"""

from __future__ import annotations

import ctypes
import functools
import math
import sys
import threading
from pathlib import Path
from typing import Any, cast

import ffi_core.bridge.cpu
import numpy as np
from ffi_core import KernelCompileError as _KernelCompileError
from ffi_core.bridge import env_cache_dir
from ffi_core.bridge.cpu import (
    AttrSig,
    BoundHandler,
    CpuPlan,
    HandlerBody,
    HandlerRecord,
    HandlerSpec,
    bind_record,
    cpu_handler_source,
    handler_globals,
)
from ffi_core.export import Unexportable

from ._checked import MESSAGE_BYTES, checked_copy
from ._inout import buffer_of_array
from ._native import ARRAY_T, bounds_layout
from ._spec import DIMS_ATTR, CallSig, KernelInfo, attribute_dtype, attribute_order, backward_counts
from ._warp import runtime, wp, wp_context

#: The environment variable naming the directory of the handler cache.
HANDLER_CACHE_ENV = "WARP_FFI_HANDLER_CACHE_DIR"

__all__ = [
    "HANDLER_CACHE_ENV",
    "KernelCompileError",
    "Loaded",
    "ensure_target",
    "handler_body",
    "handler_cache_dir",
    "handler_spec",
    "load_kernel",
    "plan",
]


class KernelCompileError(_KernelCompileError):
    """A Warp kernel that Warp cannot compile for the dtypes it is given (a
    TypeError, as every bridge's ``ffi_core.KernelCompileError``)."""


class Loaded:
    """A kernel specialization loaded on the CPU: entry points and grid rank.

    It holds Warp's ``ModuleExec``: Warp unloads a module's machine code when
    that object is collected (for example when a new overload makes Warp build
    the module again), and registered handlers call into it for the life of
    the process.
    """

    def __init__(
        self,
        kernel: Any,
        module_exec: Any,
        forward: int,
        backward: int | None,
        kernel_dim: int,
        block_dim: int = 1,
    ) -> None:
        self.kernel = kernel
        self.module_exec = module_exec
        #: Warp's hash of the specialization's code, the functions it calls
        #: and its options: the same in every process, and different when a
        #: @wp.func it calls changes (which the Python digest cannot see).
        self.code_hash: str = kernel.hash.hex()[:16]
        self.forward = forward
        self.backward = backward
        self.kernel_dim = kernel_dim
        #: Threads per block the module was built for: above 1, Warp's
        #: cooperative CPU blocks (``wp.config.enable_cpu_blocks``).
        self.block_dim = block_dim


_lock = threading.RLock()
_loaded: dict[Any, Loaded] = {}


def load_kernel(
    info: KernelInfo, dtypes: tuple[str, ...], block_dim: int = 1, boundscheck: bool = False
) -> Loaded:
    """Compile (or load from Warp's cache) the kernel for these array dtypes,
    with ``block_dim`` threads per block (``wp_ffi._warp.resolve_block_dim``);
    ``boundscheck``: its copy built in Warp's debug mode (``_checked``)."""
    kernel = info.specialized(dtypes)
    if boundscheck:
        kernel = checked_copy(kernel)
    with _lock:
        found = _loaded.get((kernel, block_dim))
        if found is not None:
            return found
        device = runtime()
        try:
            # block_dim 1 unless asked, as wp.launch loads CPU modules: one
            # thread per grid point. (The module's default, 256, builds
            # cooperative blocks, about 50 times slower for plain kernels.)
            module_exec = kernel.module.load(device, block_dim=block_dim)
            hooks = module_exec.get_kernel_hooks(kernel)
        except Exception as exc:
            raise KernelCompileError(
                f"warp kernel '{info.name}' does not compile for arrays of "
                f"({', '.join(dtypes)}): {type(exc).__name__}: {exc}"
            ) from exc
        options = kernel.module.options | kernel.options

        def address(hook: Any) -> int | None:
            return ctypes.cast(hook, ctypes.c_void_p).value if hook else None

        backward = address(hooks.backward) if options.get("enable_backward", True) else None
        forward = address(hooks.forward)
        if forward is None:
            raise KernelCompileError(
                f"warp kernel '{info.name}': Warp loaded its module but found no CPU entry point"
            )
        loaded = Loaded(kernel, module_exec, forward, backward, kernel.adj.kernel_dim, block_dim)
        _loaded[kernel, block_dim] = loaded
        return loaded


def _param_offsets(info: KernelInfo) -> dict[str, int]:
    """Each parameter's offset in Warp's argument struct, and its size (``<size>``)."""
    fields: list[tuple[str, Any]] = []
    for p in info.params:
        ctype = (
            ARRAY_T if p.is_array else getattr(wp, cast(str, p.dtype))._type_
        )  # a scalar Param always has a dtype
        fields.append((f"f{len(fields)}", ctype))
    struct = type("ArgsStruct", (ctypes.Structure,), {"_fields_": fields})
    offsets = {p.name: getattr(struct, f"f{k}").offset for k, p in enumerate(info.params)}
    offsets["<size>"] = ctypes.sizeof(struct)
    return offsets


def handler_spec(info: KernelInfo, sig: CallSig, loaded: Loaded) -> HandlerSpec:
    """The buffers and attributes the handler of one signature checks: the
    scalar parameters (float16 as its bits) and, unless the grid is the first
    output's shape, the grid (``DIMS_ATTR``: its dims and the folded count)."""
    dtypes = {p.name: attribute_dtype(cast(str, p.dtype)) for p in info.scalars}
    attrs = tuple(
        AttrSig(name, "int64", loaded.kernel_dim + 1)
        if name == DIMS_ATTR
        else AttrSig(name, dtypes[name])
        for name in attribute_order(info, dims=not sig.grid_from_output)
    )
    # The kernel's name is in its record (errors start with it), not in the
    # handler: kernels of one layout share a handler.
    label = "warp kernels" + (" (backward)" if sig.backward else "")
    return HandlerSpec(
        label,
        sig.inputs,
        sig.outputs,
        sig.batched,
        int(sig.hint),
        attrs,
        record_words=_WORDS,
    )


def _label(info: KernelInfo, sig: CallSig) -> str:
    # What the handler's errors start with: the record's label.
    return f"warp kernel '{info.name}'" + (" (backward)" if sig.backward else "")


def handler_body(info: KernelInfo, sig: CallSig, loaded: Loaded) -> HandlerBody:
    """How the handler calls Warp's entry point: Warp's launch-bounds and
    argument structs filled on its stack from the call frame (array data,
    shape, strides; scalars from the call's attributes). Buffers: forward,
    the inputs then the outputs; backward, as ``backward_counts`` says."""
    offsets = _param_offsets(info)
    n_arr = len(info.arrays)
    n_call_in = len(sig.inputs)
    n_in = backward_counts(n_call_in, len(sig.outputs))[0] if sig.backward else n_call_in
    kd = loaded.kernel_dim
    bsize, bshape, bsz, bmult = bounds_layout(kd)
    order = attribute_order(info, dims=not sig.grid_from_output)
    lines = [f"bounds = stack_buffer({bsize})", "size = 1", "mult = 1"]
    if sig.grid_from_output:
        # The default grid, the first output's (row) shape, read from its buffer
        # (whose rank the template checked).
        first = info.arrays[sig.in_out[0] if sig.in_out else n_in]
        first_ndim = cast(int, first.ndim)  # an array Param always has an ndim
        grid = f"b_{n_call_in + (n_in if sig.backward else 0)}"
        lead = int(sig.batched is not None)
        for k in range(first_ndim):
            if k < kd:
                lines += [
                    f"n = buffer_dim({grid}, {k + lead})",
                    f"store(bounds + {bshape + 4 * k}, n, types.uint32)",
                    "size *= n",
                ]
            else:  # folded: threads sharing a coordinate, as wp.launch does
                lines.append(f"mult *= buffer_dim({grid}, {k + lead})")
        lines += [
            f"store(bounds + {bshape + 4 * k}, 1, types.uint32)" for k in range(first_ndim, kd)
        ]
    else:
        dims = f"attr_{order.index(DIMS_ATTR)}"
        for k in range(kd):
            lines += [
                f"n = load({dims} + {8 * k}, types.int64)",
                f"store(bounds + {bshape + 4 * k}, n, types.uint32)",
                "size *= n",
            ]
        lines.append(f"mult = load({dims} + {8 * kd}, types.int64)")
    lines += [
        f"store(bounds + {bsz}, size * mult, types.uintp)",
        f"store(bounds + {bmult}, mult, types.uintp)",
        f"args = stack_buffer({offsets['<size>']})",
    ]
    if sig.backward:
        lines.append(f"adj = stack_buffer({offsets['<size>']})")
    for p in info.scalars:
        width = np.dtype(p.dtype).itemsize
        lines.append(f"copy_scalar(args + {offsets[p.name]}, attr_{order.index(p.name)}, {width})")

    # Every array slot filled: (struct, parameter, buffer index in the frame, zeroed).
    slots: list[tuple[str, str, int, bool]] = []
    for k, p in enumerate(info.arrays):
        if sig.backward and k < n_in:
            slots.append(("args", p.name, k, False))
            slots.append(("adj", p.name, n_call_in + k, True))
        elif sig.backward:
            slots.append(("args", p.name, n_call_in + k, False))
            slots.append(("adj", p.name, n_call_in + n_arr + k - n_in, False))
        else:  # an in-out parameter sees its output buffer
            slots.append(("args", p.name, buffer_of_array(k, n_call_in, sig.in_out), False))

    stores = []
    for m, (struct, pname, index, zeroed) in enumerate(slots):
        p = next(q for q in info.arrays if q.name == pname)
        itemsize = np.dtype((sig.inputs + sig.outputs)[index].dtype).itemsize
        element = itemsize * math.prod(p.shape)  # a vector's or matrix's bytes
        batched = sig.batched is not None and (index >= n_call_in or sig.batched[index])
        lines.append(
            f"r{m} = fill_array({struct} + {offsets[pname]}, b_{index}, {element}, {p.ndim}, {int(batched)})"
        )
        if zeroed:  # an input's gradient: Warp accumulates into it
            lines.append(f"zero_buffer(b_{index}, {itemsize})")
        if batched:
            lines.append(f"d{m} = buffer_data(b_{index})")
            stores.append(f"store({struct} + {offsets[pname]}, d{m} + b * r{m}, types.uint64)")
    # Process addresses come from the record, so the handler's code holds none.
    fn = f"word_{_ENTRY}"
    pointers = "(bounds, args, adj)" if sig.backward else "(bounds, args)"
    lines += ["if size * mult == 0:", "    return 0"]
    entry = f"call_void_fn({fn}, {pointers})"
    if loaded.block_dim == 1:  # Warp's entry points do not fail
        call: tuple[str, ...] = (entry, "return 0")
        row: tuple[str, ...] = (entry, "error = 0")
    else:
        # Cooperative CPU blocks report a failure (a block that cannot run)
        # through Warp's runtime, taken (and cleared) around each launch.
        take = f"call_message_fn(word_{_TAKE})"
        failed = "error_create_prefixed(api, name, message, ErrorCode.INTERNAL)"
        launch = (take, entry, f"message = {take}")
        call = (*launch, "if message != 0:", f"    return {failed}", "return 0")
        row = (*launch, "error = np.uintp(0)", "if message != 0:", f"    error = {failed}")
    if sig.boundscheck:  # first in a forked child (_checked.probe)
        lines.append(f"oob_text = stack_buffer({MESSAGE_BYTES})")
        adj = "adj" if sig.backward else "0"
        check = f"failed = probe({fn}, oob_text, bounds, args, {adj}, {sig.backward})"
        oob = f"error_create_prefixed(api, word_{_OOB}, failed, ErrorCode.INVALID_ARGUMENT)"
        call = (check, "if failed != 0:", f"    return {oob}", *call)
        row = (check, "if failed != 0:", f"    error = {oob}", "else:", *(f"    {x}" for x in row))
    return HandlerBody(
        call=call,
        row=(*stores, *row),
        imports=(
            "from ffi_core.abi.native import call_void_fn, cstring, error_create_prefixed, load, "
            "stack_buffer, store",
            "from warp_ffi._native import call_message_fn, copy_scalar, fill_array, zero_buffer",
            "from warp_ffi._checked import probe",
        ),
        setup=tuple(lines),
    )


def _take_block_error() -> int:
    """The address of Warp's ``wp_take_cpu_block_error``."""
    runtime()
    core: Any = wp_context.runtime.core  # type: ignore[attr-defined]
    return cast(int, ctypes.cast(core.wp_take_cpu_block_error, ctypes.c_void_p).value)


#: The record's words: the entry point Warp loaded (forward or backward),
#: Warp's ``wp_take_cpu_block_error`` (cooperative blocks) and the label of
#: an out-of-bounds error (bounds checks); 0 where unused.
_ENTRY, _TAKE, _OOB = 0, 1, 2
_WORDS = 3

_shared: dict[str, Any] = {}
_texts: dict[str, Any] = {}


def _text(text: str) -> int:
    # A NUL-terminated copy of ``text`` alive for the life of the process.
    with _lock:
        found = _texts.get(text)
        if found is None:
            found = _texts[text] = ctypes.create_string_buffer(text.encode("utf-8"))
        return ctypes.addressof(found)


def _versions() -> tuple[str, ...]:
    # What a compiled handler depends on besides its source.
    import ffi_core
    import llvmlite
    import numba

    from ._version import __version__

    return (numba.__version__, llvmlite.__version__, ffi_core.__version__, __version__, sys.version)


def handler_cache_dir() -> Path | None:
    """Where warp-ffi's CPU handlers are cached, or None when they are not
    (then compiled once per layout in every process).

    ``$WARP_FFI_HANDLER_CACHE_DIR`` wins (empty: no disk cache); otherwise
    ``$XDG_CACHE_HOME/warp-ffi-handlers`` (``~/.cache/warp-ffi-handlers``),
    created with mode 0700 and refused with an ``ffi_core.CacheDirWarning``
    (None) when it is a symlink, someone else's, or writable by others, since
    compiled code is loaded from it.
    """
    return env_cache_dir(HANDLER_CACHE_ENV, "warp-ffi-handlers", purpose="warp-ffi's handler cache")


def _shared_handler(spec: HandlerSpec, body: HandlerBody, *, cached: bool = True) -> Any:
    # The handler of one layout: compiled once per process, or loaded from
    # the disk cache where ``cached``; named by a digest of its source and
    # the versions.
    from ffi_core.abi import native as nv

    source = cpu_handler_source(spec, body)
    name = nv.handler_name("w_", source, _versions())
    with _lock:
        found = _shared.get(name)
        if found is None:
            directory = handler_cache_dir() if cached else None
            layers = nv.Layers(directory, what="warp-ffi's handler cache")
            namespace = {
                **handler_globals(spec),
                "compile_handler": nv.cached_cfunc(layers, f"{name}.handler"),
            }
            module = f"warp_ffi_handlers.{name}"
            found = nv.handler_module(module, source, namespace, f"<{module}>").handler
            _shared[name] = found
        return found


@functools.cache
def compiled_handler(info: KernelInfo, sig: CallSig, loaded: Loaded) -> BoundHandler:
    """The entry point of one signature's target: the shared handler of its
    layout (``_shared_handler``) bound to a record of the kernel's label and
    entry point (and, where used, Warp's block-error function and the label
    of an out-of-bounds error)."""
    spec = handler_spec(info, sig, loaded)
    # A bounds-checked handler calls libc through ctypes (_checked): its
    # code holds this process's addresses, so it is not cached on disk.
    handler = _shared_handler(spec, handler_body(info, sig, loaded), cached=not sig.boundscheck)
    label = _label(info, sig)
    record = HandlerRecord(label, words=_WORDS)
    entry = loaded.backward if sig.backward else loaded.forward
    record[_ENTRY] = cast(int, entry)
    if loaded.block_dim != 1:
        record[_TAKE] = _take_block_error()
    if sig.boundscheck:
        record[_OOB] = _text(f"{label} indexed an array out of bounds")
    return bind_record(handler, record)


def plan(info: KernelInfo, sig: CallSig, loaded: Loaded) -> CpuPlan:
    """The target of one signature, as ``ffi_core.bridge.cpu`` takes it."""
    return CpuPlan(
        f"warp_cpu.{info.name}",
        (info.digest, loaded.code_hash, *sig.name_parts()),
        content=f"{info.qualname}:{info.digest}:{loaded.code_hash}:{':'.join(sig.name_parts())}",
        build=lambda: compiled_handler(info, sig, loaded),
        recipe=_recipe(info, sig, loaded),
    )


def ensure_target(info: KernelInfo, sig: CallSig, loaded: Loaded) -> str:
    """Compile and register the handler; returns the target name."""
    return ffi_core.bridge.cpu.ensure_target(plan(info, sig, loaded))


def _recipe(info: KernelInfo, sig: CallSig, loaded: Loaded) -> dict[str, Any] | Unexportable:
    """How ``ffi_core.deserialize`` makes this target again (``_catalog``)."""
    if info.address_bound:
        return Unexportable(
            f"warp kernel {info.qualname!r} reads values whose repr holds a memory address "
            f"({'; '.join(info.address_bound)}), so its digest differs in every process"
        )
    return {
        "kind": "warp_cpu",
        "module": "warp_ffi",
        "kernel": info.qualname,
        "digest": info.digest,
        "code": loaded.code_hash,
        **sig.to_step(),
    }
