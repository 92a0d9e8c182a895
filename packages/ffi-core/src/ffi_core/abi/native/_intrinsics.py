"""Raw memory and function-pointer access for Numba ``nopython`` code.

The smallest set of LLVM-level operations that the call-frame helpers need:
load and store a scalar at an address (or at an address plus a literal
offset, added in the emitted code rather than typed), make an array over memory at an
address (``array_view``), turn an address into a ``voidptr`` (for
``numba.carray``), embed a constant C string, call an FFI API function
pointer with one argument, call a C function at an address read at run
time, and make readers that follow pointers to one field (``reader``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.extending import intrinsic
from numba.np.arrayobj import np_cfarray

__all__ = [
    "array_view",
    "call_api_fn",
    "call_c",
    "call_void_fn",
    "cstring",
    "load",
    "load_at",
    "reader",
    "stack_buffer",
    "store",
    "store_at",
    "voidptr",
]


def _require(ok: bool, usage: str) -> None:
    # Numba shows a TypingError raised while typing an intrinsic at the
    # misuse in the caller's code; ``usage`` says how the intrinsic is called.
    if not ok:
        raise TypingError(usage)


def _as_pointer(builder: ir.IRBuilder, address: ir.Value, pointee: ir.Type) -> ir.Value:
    return builder.inttoptr(address, pointee.as_pointer())


class Emit:
    """LLVM for intrinsics, written as their Python would read: loads and
    stores at ``address + offset`` (addresses are integers), zeroed structs on
    the caller's stack and calls into the FFI API table. What it emits goes
    into the caller, with no Numba IR to type or inline."""

    def __init__(self, context: Any, builder: ir.IRBuilder) -> None:
        self.context, self.builder = context, builder
        self.word = context.get_value_type(types.uintp)

    def const(self, ty: Any, value: int) -> ir.Value:
        return ir.Constant(self.context.get_value_type(ty), value)

    def _at(self, address: ir.Value, offset: int, ty: Any) -> ir.Value:
        moved = self.builder.add(address, ir.Constant(self.word, offset)) if offset else address
        return _as_pointer(self.builder, moved, self.context.get_value_type(ty))

    def load(self, address: ir.Value, offset: int, ty: Any) -> ir.Value:
        return self.builder.load(self._at(address, offset, ty))

    def store(self, address: ir.Value, offset: int, value: ir.Value, ty: Any) -> None:
        self.builder.store(value, self._at(address, offset, ty))

    def arg(self, value: ir.Value, fromty: Any, ty: Any = types.uintp) -> ir.Value:
        return self.context.cast(self.builder, value, fromty, ty)

    def stack(self, nbytes: int) -> ir.Value:
        # ``nbytes`` zeroed bytes on the caller's stack, as an address.
        slot = cgutils.alloca_once(
            self.builder, ir.ArrayType(ir.IntType(64), -(-nbytes // 8)), zfill=True
        )
        return self.builder.ptrtoint(slot, self.word)

    def call_fn(self, fn: ir.Value, arg: ir.Value) -> ir.Value:
        # ``((void* (*)(void*))fn)(arg)``, its result as an address.
        i8p = ir.IntType(8).as_pointer()
        callee = self.builder.inttoptr(fn, ir.FunctionType(i8p, [i8p]).as_pointer())
        result = self.builder.call(callee, [self.builder.inttoptr(arg, i8p)])
        return self.builder.ptrtoint(result, self.word)

    def call_api(self, api: ir.Value, entry: int, args: ir.Value) -> ir.Value:
        # The API table's function at offset ``entry``, called with its args struct.
        return self.call_fn(self.load(api, entry, types.uintp), args)


def listed(result: Any, params: list[inspect.Parameter] | tuple[str, ...]) -> Any:
    """The intrinsic ``result``, shown by help() and the API listing with the
    call's own parameters (``params``: names, or the typer's parameters after
    ``typingctx``)."""
    shown = [
        inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) if isinstance(p, str) else p
        for p in params
    ]
    result.__signature__ = inspect.Signature(shown)
    return result


@intrinsic
def load(typingctx, address, ty):
    """``*(ty*)address``: ``ty`` is a Numba scalar type given as a global."""
    _require(
        isinstance(address, types.Integer) and isinstance(ty, types.NumberClass),
        "load(address: int, ty: numba scalar type)",
    )
    value_type = ty.instance_type
    return value_type(address, ty), _load_codegen(0, value_type)


@intrinsic
def store(typingctx, address, value, ty):
    """``*(ty*)address = value``."""
    _require(
        isinstance(address, types.Integer) and isinstance(ty, types.NumberClass),
        "store(address: int, value, ty: numba scalar type)",
    )
    return types.void(address, value, ty), _store_codegen(0, ty.instance_type, 1)


@intrinsic(prefer_literal=True)
def load_at(typingctx, address, offset, ty):
    """``*(ty*)(address + offset)``, ``offset`` a literal int: the addition
    is emitted with the load, so Numba types one call instead of an
    addition and a call (generated handlers read dozens of such words)."""
    _require(
        isinstance(address, types.Integer)
        and isinstance(offset, types.IntegerLiteral)
        and isinstance(ty, types.NumberClass),
        "load_at(address: int, offset: literal int, ty: numba scalar type)",
    )
    value_type = ty.instance_type
    return value_type(address, offset, ty), _load_codegen(offset.literal_value, value_type)


@intrinsic(prefer_literal=True)
def store_at(typingctx, address, offset, value, ty):
    """``*(ty*)(address + offset) = value``, ``offset`` a literal int (see
    :func:`load_at`)."""
    _require(
        isinstance(address, types.Integer)
        and isinstance(offset, types.IntegerLiteral)
        and isinstance(ty, types.NumberClass),
        "store_at(address: int, offset: literal int, value, ty: numba scalar type)",
    )
    sig = types.void(address, offset, value, ty)
    return sig, _store_codegen(offset.literal_value, ty.instance_type, 2)


def _load_codegen(at: int, value_type: Any) -> Callable[..., Any]:
    # Codegen of a load of ``value_type`` at the first argument plus ``at``.
    def codegen(context, builder, sig, args):
        return Emit(context, builder).load(args[0], at, value_type)

    return codegen


def _store_codegen(at: int, value_type: Any, value_arg: int) -> Callable[..., Any]:
    # Codegen of a store at the first argument plus ``at`` of argument
    # ``value_arg``, converted to ``value_type``.
    def codegen(context, builder, sig, args):
        value = context.cast(builder, args[value_arg], sig.args[value_arg], value_type)
        Emit(context, builder).store(args[0], at, value, value_type)
        return context.get_dummy_value()

    return codegen


@intrinsic
def voidptr(typingctx, address):
    """The integer ``address`` as a ``void*`` (what ``numba.carray`` takes)."""
    _require(isinstance(address, types.Integer), "voidptr(address: int)")
    sig = types.voidptr(address)

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], ir.IntType(8).as_pointer())

    return sig, codegen


@intrinsic
def array_view(typingctx, address, shape, dtype):
    """A C-contiguous array of ``dtype`` (a NumPy scalar type given as a
    global, e.g. ``np.float32``) and ``shape`` (a tuple of ints) over the
    memory at ``address``, owned by someone else: ``numba.carray`` without its
    overload, which Numba compiles anew for each call's types."""
    _require(
        isinstance(address, types.Integer)
        and isinstance(dtype, types.DTypeSpec)
        and isinstance(shape, types.BaseTuple)
        and all(isinstance(s, types.Integer) for s in shape),
        "array_view(address: int, shape: tuple of int, dtype: a NumPy scalar type)",
    )
    retty = types.Array(dtype.dtype, len(shape), "C")
    sig = retty(address, shape, dtype)

    def codegen(context, builder, sig, args):
        pointer = types.CPointer(dtype.dtype)
        data = builder.inttoptr(args[0], context.get_value_type(pointer))
        return np_cfarray(context, builder, retty(pointer, sig.args[1]), (data, args[1]))

    return sig, codegen


@intrinsic
def cstring(typingctx, text):
    """The address of a NUL-terminated constant copy of a string literal."""
    _require(isinstance(text, types.StringLiteral), "cstring(text) needs a string literal")
    sig = types.uintp(text)
    value = text.literal_value

    def codegen(context, builder, sig, args):
        ptr = context.insert_const_string(builder.module, value)
        return builder.ptrtoint(ptr, context.get_value_type(types.uintp))

    return sig, codegen


@intrinsic
def call_api_fn(typingctx, fn, arg):
    """``((void* (*)(void*))fn)(arg)``: call an FFI API entry with its args
    struct and return what it returns (an ``XLA_FFI_Error*`` or nothing)."""
    _require(
        isinstance(fn, types.Integer) and isinstance(arg, types.Integer),
        "call_api_fn(fn: int, arg: int)",
    )
    sig = types.uintp(fn, arg)

    def codegen(context, builder, sig, args):
        return Emit(context, builder).call_fn(args[0], args[1])

    return sig, codegen


@intrinsic
def call_void_fn(typingctx, fn, args):
    """``((void (*)(void*, ...))fn)(args[0], ...)``: call a C function that
    takes pointers (given as integer addresses in a tuple) and returns nothing,
    such as a compiled kernel's entry point."""
    _require(
        isinstance(fn, types.Integer)
        and isinstance(args, types.BaseTuple)
        and all(isinstance(a, types.Integer) for a in args),
        "call_void_fn(fn: int, args: tuple of int)",
    )
    sig = types.void(fn, args)

    def codegen(context, builder, sig, llargs):
        i8p = ir.IntType(8).as_pointer()
        count = len(sig.args[1])
        fnty = ir.FunctionType(ir.VoidType(), [i8p] * count)
        callee = builder.inttoptr(llargs[0], fnty.as_pointer())
        values = cgutils.unpack_tuple(builder, llargs[1], count)
        builder.call(callee, [builder.inttoptr(v, i8p) for v in values])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def call_c(typingctx, fn, restype, args):
    """``((restype (*)(args...))fn)(*args)``: call the C function at address
    ``fn`` (read at run time, so the compiled code holds no address of this
    process and can be cached) with integer ``args`` of their Numba types,
    returning a ``restype`` integer (a Numba type given as a constant, such
    as ``types.int32``)."""
    ret = getattr(restype, "instance_type", None)
    _require(
        isinstance(fn, types.Integer)
        and isinstance(ret, types.Integer)
        and isinstance(args, types.BaseTuple)
        and all(isinstance(a, types.Integer) for a in args),
        "call_c(fn: int, restype: an integer type, args: tuple of int)",
    )
    sig = ret(fn, restype, args)

    def codegen(context, builder, sig, llargs):
        argtys = list(sig.args[2])
        fnty = ir.FunctionType(
            context.get_value_type(sig.return_type), [context.get_value_type(t) for t in argtys]
        )
        callee = builder.inttoptr(llargs[0], fnty.as_pointer())
        values = cgutils.unpack_tuple(builder, llargs[2], len(argtys))
        return builder.call(callee, values)

    return sig, codegen


@intrinsic
def stack_buffer(typingctx, nbytes):
    """The address of ``nbytes`` zeroed bytes on the caller's stack frame
    (``nbytes`` must be a literal); valid until the calling function returns."""
    _require(
        isinstance(nbytes, types.IntegerLiteral), "stack_buffer(nbytes) needs an integer literal"
    )
    size = nbytes.literal_value
    sig = types.uintp(nbytes)

    def codegen(context, builder, sig, args):
        return Emit(context, builder).stack(size)

    return sig, codegen


def reader(
    name: str,
    params: tuple[str, ...],
    path: tuple[tuple[str, int], ...],
    ty: types.Type,
    *,
    doc: str,
    module: str,
) -> Any:
    """An intrinsic ``name(*params)`` that reads one ``ty`` by following
    ``path`` from the address given first: ``("deref", offset)`` replaces the
    address with the pointer stored at ``address + offset``, ``("index",
    scale)`` adds the second argument times ``scale``, and ``("read",
    offset)``, the last step, loads the value at ``address + offset``.

    Its code is a few LLVM instructions emitted at each call, with no Numba
    IR to type or inline: a handler that reads many fields of its call frame
    compiles a good deal faster than with ``@njit(inline="always")`` readers.
    """
    *steps, (last, read_at) = path
    if last != "read" or any(op not in ("deref", "index") for op, _ in steps):
        raise ValueError(f"{name}: a path is deref/index steps then one read, got {path}")
    if len(params) != 1 + any(op == "index" for op, _ in steps):
        raise ValueError(f"{name}: takes the address, and an index where the path has one")
    usage = f"{name}({', '.join(f'{p}: int' for p in params)})"

    def typed(*args: Any) -> Any:
        _require(all(isinstance(a, types.Integer) for a in args), usage)
        sig = ty(*args)

        def codegen(context: Any, builder: ir.IRBuilder, sig: Any, llargs: Any) -> ir.Value:
            e = Emit(context, builder)
            at = e.arg(llargs[0], sig.args[0])
            for op, value in steps:
                if op == "deref":
                    at = e.load(at, value, types.uintp)
                else:
                    i = e.arg(llargs[1], sig.args[1])
                    at = builder.add(at, builder.mul(i, e.const(types.uintp, value)))
            return e.load(at, read_at, ty)

        return sig, codegen

    # Numba folds a call's arguments by the typer's own parameters: one
    # named parameter each, no ``*args``.
    def one(typingctx: Any, a: Any) -> Any:
        return typed(a)

    def two(typingctx: Any, a: Any, b: Any) -> Any:
        return typed(a, b)

    typer: Callable[..., Any] = one if len(params) == 1 else two
    typer.__name__ = typer.__qualname__ = name
    typer.__doc__ = doc
    typer.__module__ = module
    return listed(intrinsic(typer), params)
