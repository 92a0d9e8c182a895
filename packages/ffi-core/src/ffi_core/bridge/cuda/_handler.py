"""Generate the native FFI handlers that launch kernels, one per call shape.

A handler is a Numba ``cfunc`` that XLA calls directly, with no Python on
the success path: it answers the metadata handshake (declaring itself
command-buffer compatible, so XLA may capture it into a CUDA graph), checks
the buffers' count, dtypes and ranks and the attributes' count and dtypes,
takes the stream and device ordinal from the call frame, picks the
``CUfunction`` loaded into that device's context, fills the kernel's
parameters by its :class:`~ffi_core.bridge.cuda.ParamLayout` and calls
``cuLaunchKernel`` on XLA's stream, once, or once per element of a batch. A
failing driver call becomes an FFI error whose message names the kernel and
the driver's error.

Compiling a handler costs Numba about half a second, far more than loading
a kernel, so one handler serves every kernel of one call shape (buffers,
batching and parameter layout: what its code is made of) and reads what is
the kernel's own from a record (``ffi_core.bridge.cpu.HandlerRecord``, the
CPU side's): the label its errors start with, its function and context per
device, its grid, block and dynamic shared memory, and the addresses of the
driver's entry points and of the failure reporter. Each kernel gets an entry
point that passes the frame and its record on (``bind_record``: about a
millisecond). A new kernel of a shape seen before in the process costs no
compile.

The handler's code holds no address of the process (everything the process
owns comes through the record), so it is cached on disk like numba-cpu-ffi's
(``ffi_core.abi.native.cached_cfunc``: a checked directory, checksummed files,
a bad entry a miss), under a name derived from its source, where each function
it calls comes from and the versions it depends on: a later process loads it
in milliseconds. The directory is
:func:`handler_cache_dir`.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..._cache_dir import env_cache_dir
from ..._spec import ArraySig
from ..._version import __version__
from ...abi import ErrorCode, HandlerTraits, code_from_dtype, create_error
from ..cpu._record import HandlerRecord, bind_record
from ._driver import NativeDriver
from ._launch import LaunchConfig
from ._layout import Field, ParamLayout

__all__ = [
    "HANDLER_CACHE_ENV",
    "MAX_DEVICES",
    "REPORT_FN",
    "Handler",
    "LaunchSpec",
    "build_launch_handler",
    "handler_cache_dir",
    "launch_handler_source",
]

#: The environment variable naming the directory the CUDA launcher's
#: handlers are cached in ("": none).
HANDLER_CACHE_ENV = "FFI_CORE_CUDA_HANDLER_CACHE_DIR"

#: Device ordinals a handler has a function table for.
MAX_DEVICES = 64
#: ``XLA_FFI_Error* report(XLA_FFI_Api*, record, int step, int64 code)``: the
#: failure path (``record`` is the failing kernel's, for its label).
REPORT_FN = ctypes.CFUNCTYPE(
    ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_longlong
)

# The words of a kernel's record after its label (``HandlerRecord``): the
# addresses of its function and context tables (one entry per device
# ordinal), then its launch from ``_LAUNCH`` on: grid x, y, z, block x, y,
# z, shared memory; then from ``_DRIVER`` on the addresses of the functions
# the handler calls: cuLaunchKernel, cuCtxGetCurrent, cuCtxPushCurrent,
# cuCtxPopCurrent and the failure reporter (``REPORT_FN``).
_FUNCS, _CTXS, _LAUNCH = 0, 1, 2
_DRIVER = _LAUNCH + 7
_CALLS = ("launch", "ctx_get_current", "ctx_push", "ctx_pop", "report")
_WORDS = _DRIVER + len(_CALLS)

# What failed, as passed to the report function.
STEP_DEVICE, STEP_CONTEXT, STEP_LAUNCH = 1, 2, 3
EXECUTE = 3  # XLA_FFI_ExecutionStage_EXECUTE
_ATTR_SCALAR = 3


@dataclasses.dataclass(frozen=True)
class LaunchSpec:
    """What one handler is generated for.

    ``arrays`` are the call frame's buffers, the inputs then the outputs, with
    their ranks in the frame; ``lead`` says which carry a leading batch axis
    that is launched element by element (the kernel sees them without it; the
    batch count is the first such buffer's leading size).
    """

    arrays: tuple[ArraySig, ...]
    n_in: int
    layout: ParamLayout
    launch: LaunchConfig
    lead: tuple[bool, ...] | None = None

    @property
    def batched(self) -> bool:
        return self.lead is not None and any(self.lead)


def _report_message(label: str, step: int, code: int, error_name: Any) -> str:
    if step == STEP_DEVICE:
        return (
            f"{label}: no module is loaded for device ordinal {code}; the kernel is loaded "
            "into every local GPU of JAX when the computation is lowered, so this device was "
            f"not one of them (at most {MAX_DEVICES} devices are supported)"
        )
    what = "cuCtxPushCurrent" if step == STEP_CONTEXT else "cuLaunchKernel"
    return f"{label}: {what} failed with {error_name(code)} ({code})"


def _reporter(error_name: Any) -> Any:
    def report(api: int, record: int, step: int, code: int) -> int:
        try:
            label = ctypes.string_at(ctypes.c_size_t.from_address(record).value).decode(
                "utf-8", "replace"
            )
        except BaseException:
            label = "a CUDA kernel"
        try:
            message = _report_message(label, step, code, error_name)
        except BaseException:
            message = f"{label}: CUDA driver error {code} at step {step}"
        return create_error(api, message, ErrorCode.INTERNAL)

    return REPORT_FN(report)


def _store_type(ctype: str) -> str:
    """The Numba type a field of ``ctype`` is stored as (float16 as its bits)."""
    return {"float16": "uint16", "bool": "uint8"}.get(ctype, ctype)


def _attr_dtype(ctype: str) -> str:
    """The dtype of the attribute carrying a ``ctype`` scalar: XLA has no
    float16 attributes, so a float16 travels as its 16 bits."""
    return "uint16" if ctype == "float16" else ctype


def _const(field: Field) -> str:
    if field.ctype == "float16":
        return str(int(np.float16(field.value).view(np.uint16)))
    if field.ctype == "bool":
        return str(int(bool(field.value)))
    value = np.array(field.value, dtype=field.ctype).item()
    return repr(value)


def _word(i: int) -> str:
    # The record's word ``i`` after the label.
    return f"load_at(record, {8 * (1 + i)}, types.uintp)"


def launch_handler_source(spec: LaunchSpec) -> str:
    """Python source of the handler shared by every kernel of ``spec``'s call
    shape: its buffers, batching and parameter layout; the kernel's label,
    functions, contexts and launch (``spec.launch``) come from the record it
    is called with (``cfunc`` of ``uintp(frame, record)``), and so do the
    addresses of the driver's functions and of the failure reporter."""
    arrays, n_in, layout = spec.arrays, spec.n_in, spec.layout
    n_out = len(arrays) - n_in
    lead = spec.lead if spec.lead is not None and spec.batched else (False,) * len(arrays)
    attr_index = {name: j for j, (name, _) in enumerate(layout.attrs)}
    n_params = len(layout.params)

    def fail(message: str, indent: str = "        ") -> str:
        return (
            f"{indent}return error_create_prefixed(api, label, cstring({json.dumps(message)}), 3)"
        )

    def call(name: str, restype: str, *args: str) -> str:
        # The driver's or the reporter's function, at the address the record holds.
        address = _word(_DRIVER + _CALLS.index(name))
        return f"call_c({address}, types.{restype}, ({', '.join(args)},))"

    def report(step: int, code: str) -> str:
        return "return " + call(
            "report", "uintp", "api", "record", f"types.int32({step})", f"types.int64({code})"
        )

    lines = [
        "@compile_handler(types.uintp(types.uintp, types.uintp))",
        "def handler(frame, record):",
        "    if is_metadata_query(frame):",
        f"        return answer_metadata(frame, {int(HandlerTraits.COMMAND_BUFFER_COMPATIBLE)})",
        f"    if frame_stage(frame) != {EXECUTE}:",
        "        return 0",
        "    api = frame_api(frame)",
        "    label = load(record, types.uintp)",
        f"    if num_args(frame) != {n_in} or num_rets(frame) != {n_out}:",
        fail(f"called with a wrong number of buffers; expected {n_in} inputs and {n_out} outputs"),
        f"    if num_attrs(frame) != {len(layout.attrs)}:",
        fail(
            "called with a wrong number of attributes; expected "
            + (", ".join(name for name, _ in layout.attrs) or "none")
        ),
    ]
    for name, ctype in layout.attrs:
        j = attr_index[name]
        lines += [
            f"    if attr_type(frame, {j}) != {_ATTR_SCALAR} or "
            f"attr_scalar_dtype(frame, {j}) != {code_from_dtype(_attr_dtype(ctype))}:",
            fail(f"attribute {name} is not a {ctype} scalar"),
        ]
    for k, arr in enumerate(arrays):
        getter = f"arg_buffer(frame, {k})" if k < n_in else f"ret_buffer(frame, {k - n_in})"
        lines += [
            f"    b_{k} = {getter}",
            f"    if buffer_dtype(b_{k}) != {code_from_dtype(arr.dtype)} or "
            f"buffer_rank(b_{k}) != {arr.rank}:",
            fail(f"buffer {k} is not {arr.dtype} of rank {arr.rank}"),
        ]
    first_lead = next((k for k, flag in enumerate(lead) if flag), None)
    lines += [
        "    err, stream = stream_get(frame)",
        "    if err != 0:",
        "        return err",
        "    err, ordinal = device_ordinal_get(frame)",
        "    if err != 0:",
        "        return err",
        f"    if ordinal < 0 or ordinal >= {MAX_DEVICES}:",
        f"        {report(STEP_DEVICE, 'ordinal')}",
        f"    fn = load({_word(_FUNCS)} + ordinal * 8, types.uintp)",
        "    if fn == 0:",
        f"        {report(STEP_DEVICE, 'ordinal')}",
        f"    ctx = load({_word(_CTXS)} + ordinal * 8, types.uintp)",
        f"    n = buffer_dim(b_{first_lead}, 0)" if first_lead is not None else "    n = 1",
    ]
    # Sizes as the kernel sees them (without the batch axis), and each array's
    # element count, for the zero-size check and the batch offsets.
    kernel_rank = []
    for k, arr in enumerate(arrays):
        first = 1 if lead[k] else 0
        kernel_rank.append(arr.rank - first)
        for i in range(arr.rank - first):
            lines.append(f"    d_{k}_{i} = buffer_dim(b_{k}, {i + first})")
        product = " * ".join(f"d_{k}_{i}" for i in range(arr.rank - first)) or "1"
        lines.append(f"    n_{k} = types.int64({product})")
    out_total = " + ".join(f"n_{k}" for k in range(n_in, len(arrays))) or "1"
    lines += [
        "    # Nothing to write: a launch would only read; skip it.",
        f"    if n == 0 or {out_total} == 0:",
        "        return 0",
        f"    storage = stack_buffer({max(layout.size, 8)})",
        f"    ptrs = stack_buffer({max(n_params, 1) * 8})",
    ]
    lines += [f"    store_at(ptrs, {8 * i}, storage + {offset}, types.uintp)" for i, (offset, _) in
              enumerate(layout.params)]  # fmt: skip
    data_fields = []
    for field in layout.fields:
        t = f"types.{_store_type(field.ctype)}"
        if field.source == "data":
            data_fields.append(field)
            continue
        if field.source == "const":
            value = _const(field)
        elif field.source == "attr":
            value = f"load(attr_scalar_value(frame, {attr_index[field.name]}), {t})"
        elif field.source == "dim":
            value = f"d_{field.buffer}_{field.axis}"
        elif field.source == "nitems":
            value = f"n_{field.buffer}"
        else:  # stride: C-contiguous, times the unit
            rest = [
                f"d_{field.buffer}_{i}" for i in range(field.axis + 1, kernel_rank[field.buffer])
            ]
            value = " * ".join([str(int(field.value)), *rest])
        lines.append(f"    store_at(storage, {field.offset}, {value}, {t})")
    lines += [f"    g_{i} = types.uint32({_word(_LAUNCH + i)})" for i in range(_DRIVER - _LAUNCH)]
    lines += [
        "    nil = types.uintp(0)",
        "    current = stack_buffer(8)",
        f"    rc = {call('ctx_get_current', 'int32', 'current')}",
        "    pushed = False",
        "    if rc == 0 and load(current, types.uintp) != ctx:",
        f"        rc = {call('ctx_push', 'int32', 'ctx')}",
        "        pushed = rc == 0",
        "    if rc != 0:",
        f"        {report(STEP_CONTEXT, 'rc')}",
        "    for b in range(n):",
    ]
    for field in data_fields:
        k = field.buffer
        offset = f" + b * n_{k} * {np.dtype(arrays[k].dtype).itemsize}" if lead[k] else ""
        lines.append(
            f"        store_at(storage, {field.offset}, buffer_data(b_{k}){offset}, types.uintp)"
        )
    lines += [
        "        rc = "
        + call("launch", "int32", "fn", *(f"g_{i}" for i in range(7)), "stream", "ptrs", "nil"),
        "        if rc != 0:",
        "            break",
        "    if pushed:",
        f"        {call('ctx_pop', 'int32', 'current')}",
        "    if rc != 0:",
        f"        {report(STEP_LAUNCH, 'rc')}",
        "    return 0",
    ]
    return "\n".join(lines) + "\n"


@dataclasses.dataclass(frozen=True, eq=False)
class Handler:
    """One kernel's handler: the entry point XLA calls (``cfunc``, with its
    ``address``), the handler shared by its call shape that it calls with
    the kernel's record, and the per-device tables the record points to."""

    cfunc: Any  # the kernel's entry point (``bind_record``): ``address`` is what XLA calls
    functions: Any  # ctypes array: CUfunction per device ordinal
    contexts: Any  # ctypes array: CUcontext per device ordinal
    record: HandlerRecord
    shared: Any  # the call shape's handler (a Numba ``cfunc``), shared by its kernels
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
        return (self.functions, self.contexts, self.record, self.shared)


_NATIVE_NAMES = (
    "answer_metadata arg_buffer attr_scalar_dtype attr_scalar_value attr_type buffer_data "
    "buffer_dim buffer_dtype buffer_rank call_c cstring device_ordinal_get "
    "error_create_prefixed frame_api frame_stage is_metadata_query load load_at num_args "
    "num_attrs num_rets ret_buffer stack_buffer store_at stream_get"
).split()

_lock = threading.Lock()
# The handlers compiled or loaded in this process, by call shape.
_shared: dict[tuple[Any, ...], tuple[Any, str]] = {}
# Each driver's failure reporter, by driver (kept alive with it).
_reporters: dict[int, tuple[Any, NativeDriver]] = {}


def handler_cache_dir() -> Path | None:
    """Where the CUDA launcher's handlers are cached, or None when they are
    not (then compiled once per call shape in every process).

    ``$FFI_CORE_CUDA_HANDLER_CACHE_DIR`` wins (empty: no disk cache);
    otherwise ``$XDG_CACHE_HOME/ffi-core-cuda-handlers``
    (``~/.cache/ffi-core-cuda-handlers``). The directory is created with mode
    0700; one that is a symlink, is not owned by the current user or may be
    written by group or others is refused with an
    ``ffi_core.CacheDirWarning`` (None), since compiled code is loaded from it.
    """
    return env_cache_dir(
        HANDLER_CACHE_ENV, "ffi-core-cuda-handlers", purpose="the CUDA launcher's handler cache"
    )


def _shape(spec: LaunchSpec) -> tuple[Any, ...]:
    # What the shared handler's code is made of: everything but the launch.
    lead = spec.lead if spec.batched else None
    return (spec.arrays, spec.n_in, lead, spec.layout)


def _versions() -> tuple[str, ...]:
    # What the compiled handler depends on besides its source.
    import llvmlite
    import numba

    return (numba.__version__, llvmlite.__version__, __version__, sys.version)


def _origin(item: tuple[str, Any]) -> str:
    # ``name=module.qualname`` of a global the handler's source calls.
    name, value = item
    return f"{name}={getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', '?')}"


def _shared_handler(spec: LaunchSpec) -> tuple[Any, str]:
    # The handler of ``spec``'s call shape: compiled once per process, or
    # loaded from the disk cache.
    key = _shape(spec)
    with _lock:
        found = _shared.get(key)
        if found is not None:
            return found
        from numba import types

        from ...abi import native as nv

        source = launch_handler_source(spec)
        natives = {n: getattr(nv, n) for n in _NATIVE_NAMES}
        # The name covers the source, where each global it calls comes from
        # (a test harness may stand in its own) and the versions.
        name = nv.handler_name("h_", source, (*map(_origin, natives.items()), *_versions()))
        layers = nv.Layers(handler_cache_dir(), what="the CUDA launcher's handler cache")
        compile_handler = nv.cached_cfunc(layers, f"cuda.{name}.handler")
        module_name = f"ffi_core_cuda_handlers.{name}"
        namespace = {**natives, "types": types, "compile_handler": compile_handler}
        module = nv.handler_module(module_name, source, namespace, f"<{module_name}>")
        found = (module.handler, source)
        _shared[key] = found
        return found


def _driver_words(native: NativeDriver) -> list[int]:
    # The addresses the record holds from ``_DRIVER`` on, in ``_CALLS`` order.
    with _lock:
        found = _reporters.get(id(native))
        if found is None:
            found = _reporters[id(native)] = (_reporter(native.error_name), native)
    report = found[0]
    functions = [getattr(native, name) for name in _CALLS[:-1]] + [report]
    return [ctypes.cast(fn, ctypes.c_void_p).value or 0 for fn in functions]


def build_launch_handler(spec: LaunchSpec, label: str, native: NativeDriver) -> Handler:
    """The handler of ``spec`` (its errors start with ``label``) against
    ``native``'s driver entry points: the handler of its call shape, compiled
    once per process or loaded from the disk cache, called through an entry
    point of its own with a record of the kernel's label, device tables and
    launch and of the driver's entry points."""
    shared, source = _shared_handler(spec)
    functions = (ctypes.c_size_t * MAX_DEVICES)()
    contexts = (ctypes.c_size_t * MAX_DEVICES)()
    record = HandlerRecord(label, words=_WORDS)
    record[_FUNCS] = ctypes.addressof(functions)
    record[_CTXS] = ctypes.addressof(contexts)
    launch = spec.launch
    for i, value in enumerate((*launch.grid, *launch.block, launch.shared_mem)):
        record[_LAUNCH + i] = value
    for i, address in enumerate(_driver_words(native)):
        record[_DRIVER + i] = address
    entry = bind_record(shared, record)
    return Handler(entry, functions, contexts, record, shared, source)
