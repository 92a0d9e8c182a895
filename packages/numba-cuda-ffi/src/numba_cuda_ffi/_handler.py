"""Generate the native FFI handler that launches one kernel signature.

The handler is a Numba ``cfunc`` that XLA calls directly, with no Python on
the success path: it answers the metadata handshake (declaring itself
command-buffer compatible, so XLA may capture it into a CUDA graph), checks
the buffers' count, dtypes and ranks, takes the stream and device ordinal from
the call frame, picks the ``CUfunction`` loaded into that device's context,
packs each array as Numba's array struct (data pointer, sizes and C-contiguous
strides read from the frame) and calls ``cuLaunchKernel`` on XLA's stream,
once, or once per element of a batch. A failing driver call becomes an FFI
error whose message names the kernel and the driver's error.
"""

from __future__ import annotations

import ctypes
import dataclasses
import types as pytypes
from typing import Any

import numpy as np
from ffi_core import ErrorCode, HandlerTraits, code_from_dtype, create_error

from ._compile import param_layout
from ._driver import NativeDriver
from ._launch import LaunchConfig
from ._spec import CallSig

__all__ = ["MAX_DEVICES", "REPORT_FN", "Handler", "build_handler", "handler_source"]

#: Device ordinals a handler has a function table for.
MAX_DEVICES = 64
#: ``XLA_FFI_Error* report(XLA_FFI_Api*, int step, int64 code)``: the failure path.
REPORT_FN = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_longlong)

# What failed, as passed to the report function.
STEP_DEVICE, STEP_CONTEXT, STEP_LAUNCH = 1, 2, 3


def _report_message(label: str, step: int, code: int, error_name: Any) -> str:
    if step == STEP_DEVICE:
        return (
            f"{label}: no module is loaded for device ordinal {code}; the kernel is loaded "
            "into every local GPU of JAX when the computation is lowered, so this device was "
            f"not one of them (at most {MAX_DEVICES} devices are supported)"
        )
    what = "cuCtxPushCurrent" if step == STEP_CONTEXT else "cuLaunchKernel"
    return f"{label}: {what} failed with {error_name(code)} ({code})"


def _reporter(label: str, error_name: Any) -> Any:
    def report(api: int, step: int, code: int) -> int:
        try:
            message = _report_message(label, step, code, error_name)
        except BaseException:
            message = f"{label}: CUDA driver error {code} at step {step}"
        return create_error(api, message, ErrorCode.INTERNAL)

    return REPORT_FN(report)


def _slot_index(sig: CallSig) -> dict[tuple[int, str, int], int]:
    return {(s.array, s.field, s.axis): i for i, s in enumerate(param_layout(sig.kernel_arrays))}


def handler_source(sig: CallSig, launch: LaunchConfig, label: str) -> str:
    """Python source of the handler for ``sig`` and ``launch``."""
    n_in, n_out = len(sig.inputs), len(sig.outputs)
    arrays = list(sig.inputs) + list(sig.outputs)
    batch = sig.batched is not None
    lead = [bool(sig.batched[k]) for k in range(n_in)] if batch else [False] * n_in
    lead += [batch] * n_out
    slot = _slot_index(sig)
    n_slots = len(slot)
    gx, gy, gz = launch.grid
    bx, by, bz = launch.block
    lines = [
        "@cfunc(types.uintp(types.uintp))",
        "def handler(frame):",
        "    if is_metadata_query(frame):",
        f"        return answer_metadata(frame, {int(HandlerTraits.COMMAND_BUFFER_COMPATIBLE)})",
        f"    if frame_stage(frame) != {EXECUTE}:",
        "        return 0",
        "    api = frame_api(frame)",
        f"    if num_args(frame) != {n_in} or num_rets(frame) != {n_out}:",
        f'        return error_create(api, cstring("{label}: called with a wrong number of '
        f'buffers; expected {n_in} inputs and {n_out} outputs"), 3)',
    ]
    for k, arr in enumerate(arrays):
        getter = f"arg_buffer(frame, {k})" if k < n_in else f"ret_buffer(frame, {k - n_in})"
        lines += [
            f"    b_{k} = {getter}",
            f"    if buffer_dtype(b_{k}) != {code_from_dtype(arr.dtype)} or "
            f"buffer_rank(b_{k}) != {arr.rank}:",
            f'        return error_create(api, cstring("{label}: buffer {k} is not '
            f'{arr.dtype} of rank {arr.rank}"), 3)',
        ]
    lines += [
        "    err, stream = stream_get(frame)",
        "    if err != 0:",
        "        return err",
        "    err, ordinal = device_ordinal_get(frame)",
        "    if err != 0:",
        "        return err",
        f"    if ordinal < 0 or ordinal >= {MAX_DEVICES}:",
        f"        return report(api, {STEP_DEVICE}, ordinal)",
        "    fn = load({FUNCS} + ordinal * 8, types.uintp)",
        "    if fn == 0:",
        f"        return report(api, {STEP_DEVICE}, ordinal)",
        "    ctx = load({CTXS} + ordinal * 8, types.uintp)",
        f"    n = buffer_dim(b_{n_in}, 0)" if batch else "    n = 1",
    ]
    # Sizes as the kernel sees them (without the batch axis), and each array's
    # element count, for the zero-size check and the batch offsets.
    for k, arr in enumerate(arrays):
        first = 1 if lead[k] else 0
        dims = [f"buffer_dim(b_{k}, {d})" for d in range(first, arr.rank)]
        for i, d in enumerate(dims):
            lines.append(f"    d_{k}_{i} = {d}")
        product = " * ".join(f"d_{k}_{i}" for i in range(len(dims))) or "1"
        lines.append(f"    n_{k} = types.int64({product})")
    out_total = " + ".join(f"n_{k}" for k in range(n_in, n_in + n_out))
    lines += [
        "    # Nothing to write: a launch would only read; skip it.",
        f"    if n == 0 or {out_total} == 0:",
        "        return 0",
        f"    slots = stack_buffer({n_slots * 8})",
        f"    ptrs = stack_buffer({n_slots * 8})",
        # meminfo and parent stay 0 (stack_buffer zero-fills): XLA owns the memory.
        f"    for s in range({n_slots}):",
        "        store(ptrs + s * 8, slots + s * 8, types.uintp)",
    ]
    for k, arr in enumerate(arrays):
        itemsize = np.dtype(arr.dtype).itemsize
        rank = arr.rank - (1 if lead[k] else 0)
        lines += [
            f"    store(slots + {slot[(k, 'nitems', -1)] * 8}, n_{k}, types.int64)",
            f"    store(slots + {slot[(k, 'itemsize', -1)] * 8}, {itemsize}, types.int64)",
        ]
        stride = str(itemsize)
        for i in reversed(range(rank)):
            lines += [
                f"    store(slots + {slot[(k, 'shape', i)] * 8}, d_{k}_{i}, types.int64)",
                f"    store(slots + {slot[(k, 'strides', i)] * 8}, {stride}, types.int64)",
            ]
            stride = f"{stride} * d_{k}_{i}"
    lines += [
        "    current = stack_buffer(8)",
        "    rc = ctx_get_current(current)",
        "    pushed = False",
        "    if rc == 0 and load(current, types.uintp) != ctx:",
        "        rc = ctx_push(ctx)",
        "        pushed = rc == 0",
        "    if rc != 0:",
        f"        return report(api, {STEP_CONTEXT}, rc)",
        "    for b in range(n):",
    ]
    for k, arr in enumerate(arrays):
        offset = f" + b * n_{k} * {np.dtype(arr.dtype).itemsize}" if lead[k] else ""
        lines.append(
            f"        store(slots + {slot[(k, 'data', -1)] * 8}, buffer_data(b_{k}){offset}, "
            "types.uintp)"
        )
    lines += [
        f"        rc = launch(fn, {gx}, {gy}, {gz}, {bx}, {by}, {bz}, {launch.shared_mem}, "
        "stream, ptrs, 0)",
        "        if rc != 0:",
        "            break",
        "    if pushed:",
        "        ctx_pop(current)",
        "    if rc != 0:",
        f"        return report(api, {STEP_LAUNCH}, rc)",
        "    return 0",
    ]
    return "\n".join(lines) + "\n"


EXECUTE = 3  # XLA_FFI_ExecutionStage_EXECUTE


@dataclasses.dataclass(frozen=True, eq=False)
class Handler:
    """A compiled handler and the per-device tables it reads."""

    cfunc: Any
    functions: Any  # ctypes array: CUfunction per device ordinal
    contexts: Any  # ctypes array: CUcontext per device ordinal
    report: Any
    source: str

    def set_device(self, ordinal: int, context: int, function: int) -> None:
        if not 0 <= ordinal < MAX_DEVICES:
            raise RuntimeError(
                f"device ordinal {ordinal} is beyond the {MAX_DEVICES} devices a kernel "
                "handler supports"
            )
        self.contexts[ordinal] = context
        self.functions[ordinal] = function

    def has_device(self, ordinal: int) -> bool:
        return 0 <= ordinal < MAX_DEVICES and self.functions[ordinal] != 0

    def pinned(self) -> tuple[Any, ...]:
        return (self.functions, self.contexts, self.report)


def build_handler(sig: CallSig, launch: LaunchConfig, label: str, native: NativeDriver) -> Handler:
    """Compile the handler of ``sig`` and ``launch`` against ``native``'s entry points."""
    from ffi_core import native as nv
    from numba import cfunc, types

    functions = (ctypes.c_size_t * MAX_DEVICES)()
    contexts = (ctypes.c_size_t * MAX_DEVICES)()
    report = _reporter(label, native.error_name)
    source = handler_source(sig, launch, label)
    source = source.replace("{FUNCS}", str(ctypes.addressof(functions)))
    source = source.replace("{CTXS}", str(ctypes.addressof(contexts)))
    module = pytypes.ModuleType(f"numba_cuda_ffi_handler_{abs(hash(source)):x}")
    names = (
        "answer_metadata arg_buffer buffer_data buffer_dim buffer_dtype buffer_rank cstring "
        "device_ordinal_get error_create frame_api frame_stage is_metadata_query load "
        "num_args num_rets ret_buffer stack_buffer store stream_get"
    ).split()
    module.__dict__.update({name: getattr(nv, name) for name in names})
    module.__dict__.update(
        cfunc=cfunc,
        types=types,
        report=report,
        launch=native.launch,
        ctx_get_current=native.ctx_get_current,
        ctx_push=native.ctx_push,
        ctx_pop=native.ctx_pop,
    )
    exec(compile(source, f"<{module.__name__}>", "exec"), module.__dict__)
    return Handler(module.handler, functions, contexts, report, source)
