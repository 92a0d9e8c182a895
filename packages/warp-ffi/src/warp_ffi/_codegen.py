"""Load the Warp module, generate the native handler of one (kernel, signature),
and register it.

Warp compiles a kernel's Python module to machine code once (kept in Warp's
kernel cache on disk, so later processes load it) and exposes each kernel as C
entry points ``<name>_cpu_forward(bounds*, args*)`` and
``<name>_cpu_backward(bounds*, args*, adj_args*)``. The handler XLA calls is a
Numba ``cfunc`` generated here: it checks the buffers, fills Warp's
launch-bounds and argument structs on its stack from the call frame (array
data, shape, strides; scalars from the call's attributes) and calls the entry
point directly. No Python and no GIL per call; one registration serves every
shape.
"""

from __future__ import annotations

import ctypes
import functools
import json
import threading
from typing import Any

import numpy as np
from ffi_core import KernelCompileError as _KernelCompileError
from ffi_core import Unexportable, code_from_dtype, record_recipe, register_target, target_name

from ._native import ARRAY_T, bounds_layout
from ._spec import (
    DIMS_ATTR,
    CallSig,
    KernelInfo,
    attribute_dtype,
    attribute_order,
    backward_counts,
)
from ._warp import runtime, wp

__all__ = ["KernelCompileError", "Loaded", "ensure_target", "load_kernel"]


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


_lock = threading.RLock()
_loaded: dict[Any, Loaded] = {}


def load_kernel(info: KernelInfo, dtypes: tuple[str, ...]) -> Loaded:
    """Compile (or load from Warp's cache) the kernel for these array dtypes."""
    kernel = info.specialized(dtypes)
    with _lock:
        found = _loaded.get(kernel)
        if found is not None:
            return found
        device = runtime()
        try:
            # block_dim=1, as wp.launch loads CPU modules: one thread per
            # grid point. (The module's default, 256, builds cooperative
            # blocks, about 50 times slower for plain kernels.)
            module_exec = kernel.module.load(device, block_dim=1)
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
        loaded = Loaded(kernel, module_exec, forward, backward, kernel.adj.kernel_dim)
        _loaded[kernel] = loaded
        return loaded


def _literal(text: str) -> str:
    return json.dumps(text)


def _param_offsets(info: KernelInfo) -> dict[str, int]:
    """Each parameter's offset in Warp's argument struct, and its size (``<size>``)."""
    fields = []
    for p in info.params:
        ctype = ARRAY_T if p.is_array else getattr(wp, p.dtype)._type_
        fields.append((f"f{len(fields)}", ctype))
    struct = type("ArgsStruct", (ctypes.Structure,), {"_fields_": fields})
    offsets = {p.name: getattr(struct, f"f{k}").offset for k, p in enumerate(info.params)}
    offsets["<size>"] = ctypes.sizeof(struct)
    return offsets


def _source(info: KernelInfo, sig: CallSig, loaded: Loaded, label: str) -> str:
    """The handler's Python source. Buffers: forward, the inputs then the
    outputs; backward, as ``backward_counts`` says."""
    offsets = _param_offsets(info)
    n_arr = len(info.arrays)
    if sig.backward:
        n_in, _ = backward_counts(len(sig.inputs), len(sig.outputs))
    else:
        n_in = len(sig.inputs)
    n_args = len(sig.inputs) + sig.hint
    n_rets = len(sig.outputs)
    kd = loaded.kernel_dim
    bsize, bshape, bsz, bmult = bounds_layout(kd)
    order = attribute_order(info, dims=not sig.grid_from_output)
    lines = [
        "# Generated by warp-ffi: the FFI handler of one Warp kernel signature.",
        "from numba import cfunc, types",
        "from ffi_core.native import (",
        "    answer_metadata, arg_buffer, attr_array_data, attr_array_size, attr_scalar_dtype,",
        "    attr_scalar_value, attr_type, buffer_data, buffer_dim, buffer_dtype, buffer_rank,",
        "    call_void_fn, cstring, error_create, frame_api, is_metadata_query, load, num_args,",
        "    num_attrs, num_rets, ret_buffer, stack_buffer, store,",
        ")",
        "from warp_ffi._native import copy_scalar, fill_array, zero_buffer",
        "",
        "@cfunc(types.uintp(types.uintp), cache=False)",
        "def handler(frame):",
        "    if is_metadata_query(frame):",
        "        return answer_metadata(frame, 0)",
        "    api = frame_api(frame)",
    ]

    def fail(message: str, indent: str = "        ") -> str:
        return f"{indent}return error_create(api, cstring({_literal(f'{label}: {message}')}), 3)"

    lines += [
        f"    if num_args(frame) != {n_args} or num_rets(frame) != {n_rets}:",
        fail("called with a wrong number of buffers"),
        f"    if num_attrs(frame) != {len(order)}:",
        fail(f"called with a wrong number of attributes; expected {', '.join(order) or 'none'}"),
        f"    bounds = stack_buffer({bsize})",
        "    size = 1",
        "    mult = 1",
    ]
    if sig.grid_from_output:
        # The default grid, the first output's (row) shape, read from its buffer.
        first = info.arrays[n_in]
        index = n_in if sig.backward else 0
        lead = int(sig.batched is not None)
        lines += [
            f"    g = ret_buffer(frame, {index})",
            f"    if buffer_rank(g) != {first.ndim + lead}:",
            fail(f"the buffer of parameter {first.name} is not of rank {first.ndim + lead}"),
        ]
        for k in range(first.ndim):
            if k < kd:
                lines += [
                    f"    n = buffer_dim(g, {k + lead})",
                    f"    store(bounds + {bshape + 4 * k}, n, types.uint32)",
                    "    size *= n",
                ]
            else:  # folded: threads sharing a coordinate, as wp.launch does
                lines.append(f"    mult *= buffer_dim(g, {k + lead})")
        lines += [
            f"    store(bounds + {bshape + 4 * k}, 1, types.uint32)" for k in range(first.ndim, kd)
        ]
    else:
        d = order.index(DIMS_ATTR)
        lines += [
            f"    if attr_type(frame, {d}) != 1 or attr_scalar_dtype(frame, {d}) != 5 "
            f"or attr_array_size(frame, {d}) != {kd + 1}:",
            fail(f"attribute {DIMS_ATTR} is not {kd + 1} int64"),
            f"    dims = attr_array_data(frame, {d})",
        ]
        for k in range(kd):
            lines += [
                f"    n = load(dims + {8 * k}, types.int64)",
                f"    store(bounds + {bshape + 4 * k}, n, types.uint32)",
                "    size *= n",
            ]
        lines.append(f"    mult = load(dims + {8 * kd}, types.int64)")
    lines += [
        f"    store(bounds + {bsz}, size * mult, types.uintp)",
        f"    store(bounds + {bmult}, mult, types.uintp)",
        f"    args = stack_buffer({offsets['<size>']})",
    ]
    if sig.backward:
        lines.append(f"    adj = stack_buffer({offsets['<size>']})")
    for p in info.scalars:
        j = order.index(p.name)
        width = np.dtype(p.dtype).itemsize
        lines += [
            f"    if attr_type(frame, {j}) != 3 or attr_scalar_dtype(frame, {j}) != "
            f"{code_from_dtype(attribute_dtype(p.dtype))}:",
            fail(f"attribute {p.name} is not a {p.dtype} scalar"),
            f"    copy_scalar(args + {offsets[p.name]}, attr_scalar_value(frame, {j}), {width})",
        ]

    # Every array slot filled: (struct, parameter, "arg" or "ret", buffer index, zeroed).
    slots: list[tuple[str, str, str, int, bool]] = []
    for k, p in enumerate(info.arrays):
        if k < n_in:
            slots.append(("args", p.name, "arg", k, False))
            if sig.backward:
                slots.append(("adj", p.name, "ret", k, True))
        elif sig.backward:
            slots.append(("args", p.name, "ret", k, False))
            slots.append(("adj", p.name, "ret", n_arr + k - n_in, False))
        else:
            slots.append(("args", p.name, "ret", k - n_in, False))

    batched_slots = []
    for m, (struct, pname, kind, index, zeroed) in enumerate(slots):
        p = next(q for q in info.arrays if q.name == pname)
        arr = (sig.inputs if kind == "arg" else sig.outputs)[index]
        itemsize = np.dtype(arr.dtype).itemsize
        batched = sig.batched is not None and (kind == "ret" or sig.batched[index])
        lead = int(batched)
        lines += [
            f"    b{m} = {kind}_buffer(frame, {index})",
            f"    if buffer_dtype(b{m}) != {code_from_dtype(arr.dtype)} "
            f"or buffer_rank(b{m}) != {p.ndim + lead}:",
            fail(f"the buffer of parameter {pname} is not {arr.dtype} of rank {p.ndim + lead}"),
            f"    r{m} = fill_array({struct} + {offsets[pname]}, b{m}, {itemsize}, {p.ndim}, {lead})",
        ]
        if zeroed:  # an input's gradient: Warp accumulates into it
            lines.append(f"    zero_buffer(b{m}, {itemsize})")
        if batched:
            lines.append(f"    d{m} = buffer_data(b{m})")
            batched_slots.append((m, struct, offsets[pname]))
    fn = loaded.backward if sig.backward else loaded.forward
    pointers = "(bounds, args, adj)" if sig.backward else "(bounds, args)"
    call = f"call_void_fn({fn}, {pointers})"
    lines += ["    if size * mult == 0:", "        return 0"]
    if sig.batched is None:
        lines.append(f"    {call}")
    else:
        lines.append("    for b in range(buffer_dim(ret_buffer(frame, 0), 0)):")
        for m, struct, offset in batched_slots:
            lines.append(f"        store({struct} + {offset}, d{m} + b * r{m}, types.uint64)")
        lines.append(f"        {call}")
    lines.append("    return 0")
    return "\n".join(lines) + "\n"


@functools.cache
def compiled_handler(info: KernelInfo, sig: CallSig, loaded: Loaded) -> tuple[str, Any]:
    """``(target_name, cfunc)`` for one signature, compiled once per process."""
    label = f"warp kernel '{info.name}'" + (" (backward)" if sig.backward else "")
    source = _source(info, sig, loaded, label)
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<warp_ffi handler {info.name}>", "exec"), namespace)
    name = target_name(f"warp_cpu.{info.name}", info.digest, loaded.code_hash, *sig.name_parts())
    return name, namespace["handler"]


def ensure_target(info: KernelInfo, sig: CallSig, loaded: Loaded) -> str:
    """Compile and register the handler; returns the target name."""
    with _lock:
        name, handler = compiled_handler(info, sig, loaded)
    register_target(
        name,
        handler,
        content=f"{info.qualname}:{info.digest}:{loaded.code_hash}:{':'.join(sig.name_parts())}",
        platform="cpu",
    )
    record_recipe(name, _recipe(info, sig, loaded))
    return name


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
