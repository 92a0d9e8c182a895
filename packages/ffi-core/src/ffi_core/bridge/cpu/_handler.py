"""The one handler template of CPU kernels: what XLA calls, as Python source.

The handler is a Numba ``cfunc`` that XLA calls directly, with no Python on
the success path. The template writes what every CPU bridge needs, the same
way each time: the metadata handshake, the buffers' count, dtypes and ranks
and the attributes' count and dtypes checked (a wrong one is an FFI error
naming the kernel), the buffers bound to names, and the batch loop of a
vmapped call (inline, or across threads once a call holds enough work). A
bridge fills in only what its language needs: a :class:`HandlerBody` (how
to call its kernel once, and once per batch row).

Generated code names the C API's constants by their ``ffi_core.abi``
enums (``ErrorCode.INVALID_ARGUMENT``, ``AttrType.SCALAR``,
``DataType.F32``): Numba folds them into constants, and a reader of the
source sees what each one means.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..._spec import ArraySig
from ...abi import AttrType, DataType, ErrorCode, HandlerTraits, code_from_dtype
from ._record import WORD_BYTES

__all__ = [
    "AttrSig",
    "HandlerBody",
    "HandlerSpec",
    "build_cpu_handler",
    "cpu_handler_source",
    "cpu_threaded_loop_source",
    "handler_globals",
]


@dataclasses.dataclass(frozen=True)
class AttrSig:
    """One attribute of the call: its name (for messages), dtype and form.

    ``length`` None: a scalar; an int: an array of that many elements. The
    handler binds attribute ``j`` as ``attr_<j>``, the address of its value
    (a scalar) or of its first element (an array).
    """

    name: str
    dtype: str
    length: int | None = None


@dataclasses.dataclass(frozen=True)
class HandlerSpec:
    """The buffers and attributes one handler checks.

    ``inputs`` and ``outputs`` are the call frame's buffers (ranks include a
    batch axis); ``extra_inputs`` more inputs that the handler ignores and
    does not check (the cost hint of large calls, ``ffi_core.bridge.hint_source``);
    ``batched`` as in ``ffi_core.bridge.CallSig``; ``attrs`` None: attributes are
    not checked (the call has none). ``extra_optional``: the extra inputs
    may also be absent (one handler for calls with and without the hint).

    ``record_words`` None: the handler serves one kernel, whose ``label`` its
    messages carry. An int: the handler serves every kernel of this call
    shape; it is called as ``handler(frame, record)`` (through
    :func:`ffi_core.bridge.cpu.bind_record`), reads the label its messages carry
    from the :class:`ffi_core.bridge.cpu.HandlerRecord` at ``record`` and binds
    that many of the record's words as ``word_0``, ``word_1``, ... (the
    kernel's addresses); ``label`` then only describes the shape.
    """

    label: str
    inputs: tuple[ArraySig, ...]
    outputs: tuple[ArraySig, ...]
    batched: tuple[bool, ...] | None = None
    extra_inputs: int = 0
    attrs: tuple[AttrSig, ...] | None = None
    record_words: int | None = None
    extra_optional: bool = False

    @property
    def arrays(self) -> tuple[ArraySig, ...]:
        return self.inputs + self.outputs


@dataclasses.dataclass(frozen=True)
class HandlerBody:
    """What a bridge's handler does once the template's checks have passed.

    Each field is lines of Python source (no indentation) run inside the
    ``cfunc``, where ``frame``, ``api`` and ``name`` (the label as a C
    string) are defined, buffer ``k`` (the inputs, then the outputs) is
    ``b_<k>``, with ``views`` also ``v_<k>`` (a NumPy array over it, shaped
    from the frame), attribute ``j`` is ``attr_<j>``, and with ``threads``
    set ``work`` is the size of the largest view.

    Attributes:
        imports: import lines the body needs.
        setup: statements run once per call after the checks (may ``return``
            an error early).
        call: an unbatched call: statements ending in ``return <error>``
            (0: success).
        row: one row ``b`` of a batched call: statements that set ``error``
            (0: success). The template loops over the first output's leading
            axis and returns the first error.
        batch_call: statements run before the rows of a batched call (with
            ``threads`` set, after ``work``); they may ``return <error>`` to serve the whole
            batch in one call (a kernel of the bridge's own that loops over
            the rows), else the rows run.
        threaded_row: the row when the rows run across threads (default
            ``row``).
        heavy_row: the row when the call holds ``threads`` elements of work
            but the batch is a single row (default ``row``).
        row_args: the handler's variables that rows read (the loop runs in a
            function of its own when ``threads`` is set).
        threads: the least ``work`` for which rows run across threads; None:
            the rows run one by one inside the handler.
        views: bind every buffer as an array ``v_<k>``.
        threaded_loop: with ``threads``, the handler's variable holding the
            address of the loop that runs the rows across threads (0 until
            built), a function the bridge compiles apart from the handler
            from :func:`cpu_threaded_loop_source`, only once a call needs it
            (its compile is most of a batched handler's). The handler then
            holds no loop of threads: it runs the rows one by one, and calls
            the loop through its address for a call of ``threads`` work or
            more in several rows. None: the loop is compiled into the handler.
    """

    call: tuple[str, ...]
    row: tuple[str, ...] = ()
    threaded_row: tuple[str, ...] | None = None
    heavy_row: tuple[str, ...] | None = None
    batch_call: tuple[str, ...] = ()
    row_args: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    threads: int | None = None
    views: bool = False
    threaded_loop: str | None = None


def _literal(text: str) -> str:
    # A JSON string is a valid Python literal: quotes and backslashes in kernel
    # names or error contexts cannot break the generated source.
    return json.dumps(text)


def _data_type(dtype: str) -> str:
    return f"DataType.{DataType(code_from_dtype(dtype)).name}"


def _indent(lines: Sequence[str], depth: int) -> list[str]:
    return [" " * (4 * depth) + line for line in lines]


def _attr_lines(attrs: tuple[AttrSig, ...], fail: Any) -> list[str]:
    expected = ", ".join(a.name for a in attrs) or "none"
    lines = [
        f"    if num_attrs(frame) != {len(attrs)}:",
        fail(f"called with a wrong number of attributes; expected {expected}"),
    ]
    for j, attr in enumerate(attrs):
        if attr.length is None:
            lines += [
                f"    if attr_type(frame, {j}) != AttrType.{AttrType.SCALAR.name} "
                f"or attr_scalar_dtype(frame, {j}) != {_data_type(attr.dtype)}:",
                fail(f"attribute {attr.name} is not a {attr.dtype} scalar"),
                f"    attr_{j} = attr_scalar_value(frame, {j})",
            ]
        else:
            lines += [
                f"    if attr_type(frame, {j}) != AttrType.{AttrType.ARRAY.name} "
                f"or attr_scalar_dtype(frame, {j}) != {_data_type(attr.dtype)} "
                f"or attr_array_size(frame, {j}) != {attr.length}:",
                fail(f"attribute {attr.name} is not {attr.length} {attr.dtype}"),
                f"    attr_{j} = attr_array_data(frame, {j})",
            ]
    return lines


def _batch_lines(spec: HandlerSpec, body: HandlerBody) -> tuple[list[str], list[str]]:
    """The batch loop: ``(helper function lines, handler lines)``."""
    n_in = len(spec.inputs)
    if body.threads is None:
        # One row after the other, inside the handler.
        return [], _rows_one_by_one(f"buffer_dim(b_{n_in}, 0)", body.row)

    if body.threaded_loop is not None:
        return [], _rows_or_threaded_loop(spec, body, body.threads)

    # Threads pay only with enough work (serial below the threshold); every
    # row then runs the threaded row (a kernel waking threads per row would
    # wake them n times). The loop is a function of its own: prange needs it.
    args = ", ".join(body.row_args)
    helper = [
        # Only the handler calls it: no Python or C wrapper.
        "@compile_loop(parallel=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)",
        f"def batch_loop(api, name, work, n, {args}):",
        "    errors = np.empty(n, np.uintp)",
        f"    if work >= {body.threads} and n > 1:",
        *_rows_into_errors("prange", body.threaded_row or body.row, 2),
    ]
    if body.heavy_row is not None:
        helper += [f"    elif work >= {body.threads}:"]
        helper += _rows_into_errors("range", body.heavy_row, 2)
    helper += ["    else:", *_rows_into_errors("range", body.row, 2)]
    helper += ["    return first_error(api, errors)", ""]
    call = [f"    return batch_loop(api, name, work, buffer_dim(b_{n_in}, 0), {args})"]
    return helper, call


def _rows_one_by_one(count: str, row: Sequence[str]) -> list[str]:
    # The handler's loop over ``count`` rows, returning the first error.
    return [
        f"    for b in range({count}):",
        *_indent(row, 2),
        "        if error != 0:",
        "            return error",
        "    return 0",
    ]


def _rows_into_errors(loop: str, row: Sequence[str], depth: int) -> list[str]:
    # A loop (``range`` or ``prange``) over ``n`` rows at ``depth``, each
    # row's error kept in ``errors[b]``.
    head = " " * (4 * depth)
    return [f"{head}for b in {loop}(n):", *_indent(row, depth + 1), f"{head}    errors[b] = error"]


def _rows_or_threaded_loop(spec: HandlerSpec, body: HandlerBody, threads: int) -> list[str]:
    # The rows one by one in the handler, or, for a call of enough work in
    # several rows, the loop of threads called through its address.
    n_in = len(spec.inputs)
    row = list(body.row)
    if body.heavy_row is not None:
        # A call of enough work runs each row with the kernel's own threads.
        row = [f"if work >= {threads}:", *_indent(body.heavy_row, 1), "else:"]
        row += _indent(body.row, 1)
    return [
        f"    n = buffer_dim(b_{n_in}, 0)",
        f"    if work >= {threads} and n > 1 and {body.threaded_loop} != 0:",
        "        first = stack_buffer(8)  # the loop's first error, or 0",
        f"        error = call_guarded_at({body.threaded_loop}, api, name, "
        f"(api, name, work, n, first, {', '.join(body.row_args)},))",
        "        if error != 0:",
        "            return error",
        "        return load(first, types.uintp)",
        *_rows_one_by_one("n", row),
    ]


def cpu_threaded_loop_source(spec: HandlerSpec, body: HandlerBody) -> str:
    """Python source of the loop that runs the rows of a batched call of
    ``spec`` across threads, for a ``body`` with ``threaded_loop``: the module
    defines ``threaded_loop(api, name, work, n, first, *row_args)``, decorated
    with ``compile_loop``, which runs ``body``'s threaded row (else its row)
    for each of the ``n`` rows in a ``prange`` and stores the first error (0
    when none) at the address ``first``. The bridge compiles it with the
    types the handler calls it with and puts its address where
    ``threaded_loop`` names it."""
    if spec.batched is None or body.threads is None or body.threaded_loop is None:
        raise ValueError("a threaded loop is for a batched call with threads and threaded_loop")
    args = ", ".join(body.row_args)
    lines = [
        f"# Generated by ffi_core.bridge.cpu: the loop of threads over the rows of {spec.label}.",
        *_HEADER,
        *body.imports,
        "",
        "# Only the handler calls it, through its address: no Python or C wrapper.",
        "@compile_loop(parallel=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)",
        f"def threaded_loop(api, name, work, n, first, {args}):",
        "    errors = np.empty(n, np.uintp)",
        *_rows_into_errors("prange", body.threaded_row or body.row, 1),
        "    store(first, first_error(api, errors), types.uintp)",
    ]
    return "\n".join(lines) + "\n"


#: The imports of generated CPU sources.
_HEADER = (
    "import numpy as np",
    "from numba import prange, types",
    "from ffi_core.abi import AttrType, DataType, ErrorCode",
    # The template's vocabulary: all of ffi_core.abi.native (its __all__).
    "from ffi_core.abi.native import *",
)


def _args_check(n_in: int, spec: HandlerSpec) -> str:
    # The condition under which the frame has a wrong number of inputs.
    expected = n_in + spec.extra_inputs
    if spec.extra_optional and spec.extra_inputs:
        return f"(num_args(frame) != {n_in} and num_args(frame) != {expected})"
    return f"num_args(frame) != {expected}"


def cpu_handler_source(spec: HandlerSpec, body: HandlerBody) -> str:
    """Python source of the handler of ``spec`` running ``body``.

    The module defines ``handler``, decorated with ``compile_handler`` (and
    the batch loop with ``compile_loop``); :func:`handler_globals` gives
    them and the other globals it reads.

    Example:
        >>> f32 = ArraySig("float32", 1)
        >>> spec = HandlerSpec("toy kernel 'neg'", (f32,), (f32,))
        >>> source = cpu_handler_source(spec, HandlerBody(call=("return 0",)))
        >>> print(next(line for line in source.splitlines() if "buffer_dtype(b_0)" in line))
            if buffer_dtype(b_0) != DataType.F32 or buffer_rank(b_0) != 1:
    """
    n_in, n_out = len(spec.inputs), len(spec.outputs)

    shared = spec.record_words is not None
    code = f"ErrorCode.{ErrorCode.INVALID_ARGUMENT.name}"

    def fail(message: str) -> str:
        if shared:
            # The kernel's name is known at run time only: the record's label.
            return f"        return error_create_prefixed(api, name, cstring({_literal(message)}), {code})"
        text = _literal(f"{spec.label}: {message}")
        return f"        return error_create(api, cstring({text}), {code})"

    lines = [
        f"# Generated by ffi_core.bridge.cpu: the FFI handler of {spec.label}.",
        *_HEADER,
        *body.imports,
        "",
    ]
    batched = spec.batched is not None
    if batched:
        helper, rows = _batch_lines(spec, body)
        tail = _indent(body.batch_call, 1) + rows
    else:
        helper, tail = [], _indent(body.call, 1)
    lines += helper
    if shared:
        head = [
            "@compile_handler(types.uintp(types.uintp, types.uintp))",
            "def handler(frame, record):",
        ]
        name = "load(record, types.uintp)  # word 0 of the record: the label"
    else:
        head = ["@compile_handler(types.uintp(types.uintp))", "def handler(frame):"]
        name = f"cstring({_literal(spec.label)})"
    lines += [
        *head,
        "    if is_metadata_query(frame):",
        f"        return answer_metadata(frame, {int(HandlerTraits.NONE)})  # HandlerTraits.NONE",
        "    api = frame_api(frame)",
        f"    name = {name}",
        f"    if {_args_check(n_in, spec)} or num_rets(frame) != {n_out}:",
        fail(f"called with a wrong number of buffers; expected {n_in} inputs and {n_out} outputs"),
    ]
    if spec.attrs is not None:
        lines += _attr_lines(spec.attrs, fail)
    for k, arr in enumerate(spec.arrays):
        getter = f"arg_buffer(frame, {k})" if k < n_in else f"ret_buffer(frame, {k - n_in})"
        lines += [
            f"    b_{k} = {getter}",
            f"    if buffer_dtype(b_{k}) != {_data_type(arr.dtype)} or buffer_rank(b_{k}) != {arr.rank}:",
            fail(f"buffer {k} is not {arr.dtype} of rank {arr.rank}"),
        ]
        if body.views:
            dims = ", ".join(f"buffer_dim(b_{k}, {d})" for d in range(arr.rank))
            shape = f"({dims},)" if arr.rank else "()"
            lines.append(f"    v_{k} = array_view(buffer_data(b_{k}), {shape}, dtype_{k})")
    for i in range(spec.record_words or 0):
        lines.append(f"    word_{i} = load_at(record, {WORD_BYTES * (i + 1)}, types.uintp)")
    lines += _indent(body.setup, 1)
    if body.threads is not None:
        # The work of a call, which decides on threads: its largest buffer.
        lines.append("    work = 0")
        lines += [f"    work = max(work, v_{k}.size)" for k in range(len(spec.arrays))]
    lines += tail
    return "\n".join(lines) + "\n"


def handler_globals(spec: HandlerSpec) -> dict[str, Any]:
    """The globals the template's source reads besides its imports: each
    view's dtype, and the default (uncached) compilers."""
    import numba

    namespace: dict[str, Any] = {
        "compile_handler": functools.partial(numba.cfunc, cache=False),
        "compile_loop": functools.partial(numba.njit, cache=False),
    }
    for k, arr in enumerate(spec.arrays):
        namespace[f"dtype_{k}"] = np.dtype(arr.dtype).type
    return namespace


def build_cpu_handler(
    spec: HandlerSpec, body: HandlerBody, namespace: Mapping[str, Any] | None = None
) -> Any:
    """Compile the handler of ``spec`` running ``body`` (a Numba ``cfunc``;
    its ``address`` is what XLA calls), with ``namespace`` as more globals."""
    source = cpu_handler_source(spec, body)
    scope = handler_globals(spec) | dict(namespace or {})
    exec(compile(source, f"<ffi_core.bridge.cpu handler of {spec.label}>", "exec"), scope)
    return scope["handler"]
