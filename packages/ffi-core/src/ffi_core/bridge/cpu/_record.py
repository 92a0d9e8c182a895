"""Handlers shared by every kernel of one call shape, and the per-target
records and entry points that make them one target each.

Compiling a handler per kernel costs more than compiling the kernel. A
bridge can instead compile one handler per call shape (dtypes, ranks,
batching) that reads the kernel to call from a :class:`HandlerRecord`: a few
machine words per target (the label its errors carry, then the bridge's
words, such as the kernel's compiled address). XLA calls a target's handler
with the call frame only, so each target gets an entry point of its own,
:func:`bind_record`: a two-instruction function that passes the frame and
its record on to the shared handler.
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
from typing import Any

__all__ = ["WORD_BYTES", "BoundHandler", "HandlerRecord", "bind_record"]

#: The size of one word of a record: a native pointer.
WORD_BYTES = ctypes.sizeof(ctypes.c_void_p)


class HandlerRecord:
    """The words a shared handler reads for one target, pinned in memory for
    the life of the object: word 0 is the address of the label (a
    NUL-terminated UTF-8 string that run-time errors start with), words
    ``1..words`` are the bridge's, read and written as ``record[i]``
    (``i`` from 0), initially 0.

    Example:
        >>> record = HandlerRecord("toy kernel 'neg'", words=2)
        >>> record[1] = 1234
        >>> record[0], record[1]
        (0, 1234)
    """

    def __init__(self, label: str, *, words: int) -> None:
        self.label = label
        self._text = ctypes.create_string_buffer(label.encode("utf-8"))
        self._words = (ctypes.c_size_t * (1 + words))()
        self._words[0] = ctypes.addressof(self._text)
        self._count = words

    @property
    def address(self) -> int:
        """Where the record is: what the handler receives as ``record``."""
        return ctypes.addressof(self._words)

    def _index(self, i: int) -> int:
        if not 0 <= i < self._count:
            raise IndexError(f"record word {i} out of range: the record has {self._count} words")
        return 1 + i

    def __getitem__(self, i: int) -> int:
        return int(self._words[self._index(i)])

    def __setitem__(self, i: int, value: int) -> None:
        # One aligned word: a handler running now reads the old value or the new.
        self._words[self._index(i)] = value


class BoundHandler:
    """A target's entry point: ``address`` is what XLA calls; it calls the
    shared handler with the frame and the record, both kept alive here."""

    def __init__(self, address: int, handler: Any, record: HandlerRecord, code: Any) -> None:
        self.address = address
        self.handler = handler
        self.record = record
        self._code = code


_lock = threading.Lock()


def bind_record(handler: Any, record: HandlerRecord) -> BoundHandler:
    """The entry point that calls ``handler(frame, record.address)`` (a
    shared handler: a ``cfunc`` of ``uintp(uintp, uintp)``) for a frame.

    It is a tail call with a constant argument, generated as LLVM IR and
    added to Numba's JIT engine as it is (no optimisation passes: there is
    nothing to optimise, and each pass manager would stay resident), in
    about a millisecond and 13 KiB; it lives for the life of the process.
    """
    from llvmlite import binding, ir
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import cpu_target

    target = int(handler.address)
    word = ir.IntType(8 * WORD_BYTES)
    name = (
        "ffi_core_bound_" + hashlib.sha256(f"{target}:{record.address}".encode()).hexdigest()[:16]
    )
    codegen = cpu_target.target_context.codegen()
    module = codegen._create_empty_module(name)
    entry = ir.Function(module, ir.FunctionType(word, [word]), name)
    builder = ir.IRBuilder(entry.append_basic_block())
    callee = builder.inttoptr(
        ir.Constant(word, target), ir.FunctionType(word, [word, word]).as_pointer()
    )
    result = builder.call(callee, [entry.args[0], ir.Constant(word, record.address)], tail=True)
    builder.ret(result)
    code = binding.parse_assembly(str(module))
    with _lock, global_compiler_lock:
        # Numba's engine (MCJIT) keeps the module's machine code where it is.
        codegen._engine.add_module(code)
        codegen._engine.finalize_object()
        address = codegen._engine.get_function_address(name)
    if not address:
        raise RuntimeError(f"the JIT engine did not define the entry point {name}")
    return BoundHandler(address, handler, record, code)
