"""Call a Numba-compiled function and turn a raised exception into an FFI error.

Numba's own ``cfunc`` wrapper prints an exception raised inside it and returns
as if all went well; XLA would then hand the caller garbage. ``call_guarded``
calls the function with Numba's internal calling convention instead, checks
its status, and only on failure takes the GIL to turn the exception into an
``XLA_FFI_Error*`` whose message names the kernel. The success path runs no
Python.
"""

from __future__ import annotations

import ctypes

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.extending import intrinsic

from .. import _capi as C
from .._capi import ErrorCode
from .._frame import create_error

__all__ = ["call_guarded", "call_guarded_at", "compiled_address", "error_from_exception"]


def error_from_exception(api: int, name_address: int, exc_type: object, exc_value: object) -> int:
    """Create the ``XLA_FFI_Error*`` for an exception raised by the kernel named
    by the C string at ``name_address``.

    Called from native code, with the GIL held, on the failure path only.
    """
    name = ctypes.string_at(name_address).decode("utf-8", "replace")
    try:
        if not isinstance(exc_value, BaseException):
            # An unnormalized exception: the value is its argument(s).
            if exc_value is None:
                args: tuple = ()
            elif isinstance(exc_value, tuple):
                args = exc_value
            else:
                args = (exc_value,)
            exc_value = exc_type(*args)  # type: ignore[operator]
        detail = str(exc_value)
        kind = type(exc_value).__name__
        message = f"{name} raised {kind}: {detail}" if detail else f"{name} raised {kind}"
    except BaseException:
        message = f"{name} raised an exception that could not be formatted"
    return create_error(api, message, ErrorCode.UNKNOWN)


def _emit_error_create(context, builder, api, message) -> ir.Value:
    """LLVM for ``api->XLA_FFI_Error_Create({message, INTERNAL})``, ``message``
    being the address of a C string; used when even Python cannot format the
    exception."""
    i8p = ir.IntType(8).as_pointer()
    uintp = context.get_value_type(types.uintp)
    args_type = ir.ArrayType(ir.IntType(8), ctypes.sizeof(C.XLA_FFI_Error_Create_Args))
    args = cgutils.alloca_once(builder, args_type, zfill=True)
    base = builder.ptrtoint(args, uintp)

    def field(offset: int, lltype: ir.Type) -> ir.Value:
        return builder.inttoptr(builder.add(base, ir.Constant(uintp, offset)), lltype.as_pointer())

    size = C.struct_size(C.XLA_FFI_Error_Create_Args, "errc")
    builder.store(ir.Constant(uintp, size), field(0, uintp))
    builder.store(
        builder.inttoptr(message, i8p),
        field(C.offset_of(C.XLA_FFI_Error_Create_Args, "message"), i8p),
    )
    builder.store(
        ir.Constant(ir.IntType(32), int(ErrorCode.INTERNAL)),
        field(C.offset_of(C.XLA_FFI_Error_Create_Args, "errc"), ir.IntType(32)),
    )
    slot = builder.add(api, ir.Constant(uintp, C.offset_of(C.XLA_FFI_Api, "XLA_FFI_Error_Create")))
    fn = builder.load(builder.inttoptr(slot, uintp.as_pointer()))
    callee = builder.inttoptr(fn, ir.FunctionType(i8p, [i8p]).as_pointer())
    return builder.ptrtoint(builder.call(callee, [builder.bitcast(args, i8p)]), uintp)


def _guarded_status(context, builder, status, api, name) -> ir.Value:
    """0 when ``status`` is a success, else an ``XLA_FFI_Error*`` for the
    exception it carries, made with the GIL held (the failure path only)."""
    uintp = context.get_value_type(types.uintp)
    result = cgutils.alloca_once_value(builder, ir.Constant(uintp, 0))
    with builder.if_then(status.is_error, likely=False):
        pyapi = context.get_python_api(builder)
        gil = pyapi.gil_ensure()
        context.call_conv.raise_error(builder, pyapi, status)
        slots = [cgutils.alloca_once(builder, pyapi.pyobj) for _ in range(3)]
        pyapi.err_fetch(*slots)
        exc_type, exc_value, exc_tb = (builder.load(s) for s in slots)
        formatter = pyapi.unserialize(pyapi.serialize_object(error_from_exception))
        api_obj = pyapi.long_from_ulonglong(api)
        name_obj = pyapi.long_from_ulonglong(name)
        error_obj = pyapi.call_function_objargs(formatter, [api_obj, name_obj, exc_type, exc_value])
        with builder.if_else(cgutils.is_not_null(builder, error_obj)) as (ok, failed):
            with ok:
                address = pyapi.long_as_voidptr(error_obj)
                builder.store(builder.ptrtoint(address, uintp), result)
            with failed:
                pyapi.err_clear()
                builder.store(_emit_error_create(context, builder, api, name), result)
        for obj in (error_obj, name_obj, api_obj, formatter, exc_type, exc_value, exc_tb):
            pyapi.decref(obj)
        pyapi.gil_release(gil)
    return builder.load(result)


@intrinsic
def call_guarded(typingctx, fn, api, name, args):
    """``call_guarded(fn, api, name, (a, b, ...))``: call the ``@njit`` function
    ``fn(a, b, ...)``; return 0, or an ``XLA_FFI_Error*`` made through the API
    table at ``api`` whose message starts with the C string at address ``name``
    (from ``cstring("...")``)."""
    if not isinstance(fn, types.Dispatcher):
        raise TypingError("call_guarded: `fn` must be an @njit function")
    if not isinstance(name, types.Integer) or not isinstance(args, types.BaseTuple):
        raise TypingError("call_guarded(fn, api, name: C string address, args: tuple)")
    inner = typingctx.resolve_function_type(fn, tuple(args.types), {})
    if inner is None:
        raise TypingError(f"call_guarded: {fn} cannot be called with {args}")
    sig = types.uintp(fn, api, name, args)

    def codegen(context, builder, sig, llargs):
        cres = fn.dispatcher.overloads[inner.args]
        context.add_linking_libs([cres.library])
        items = cgutils.unpack_tuple(builder, llargs[3], len(args.types))
        status, _ = context.call_internal_no_propagate(builder, cres.fndesc, inner, items)
        return _guarded_status(context, builder, status, llargs[1], llargs[2])

    return sig, codegen


@intrinsic
def call_guarded_at(typingctx, address, api, name, args):
    """``call_guarded_at(address, api, name, (a, b, ...))``: as
    :func:`call_guarded`, for a function compiled elsewhere and known by the
    ``address`` of its Numba-internal entry point (``compiled_address``),
    which takes ``(a, b, ...)`` of exactly these types and returns nothing.

    One handler compiled with it serves every function of that signature: the
    address is read at run time, not linked in.
    """
    if not isinstance(address, types.Integer) or not isinstance(name, types.Integer):
        raise TypingError("call_guarded_at(address: int, api, name: C string address, args)")
    if not isinstance(args, types.BaseTuple):
        raise TypingError("call_guarded_at(address, api, name, args: tuple)")
    argtypes = tuple(args.types)
    sig = types.uintp(address, api, name, args)

    def codegen(context, builder, sig, llargs):
        fnty = context.call_conv.get_function_type(types.none, argtypes)
        callee = builder.inttoptr(llargs[0], fnty.as_pointer())
        items = cgutils.unpack_tuple(builder, llargs[3], len(argtypes))
        status, _ = context.call_conv.call_function(builder, callee, types.none, argtypes, items)
        return _guarded_status(context, builder, status, llargs[1], llargs[2])

    return sig, codegen


def compiled_address(dispatcher: object, argtypes: tuple[types.Type, ...]) -> int:
    """The address of the Numba-internal entry point of ``dispatcher``'s
    overload for ``argtypes`` (compiled already), as ``call_guarded_at``
    calls it. The dispatcher must stay alive while the address is used."""
    cres = dispatcher.overloads[argtypes]  # type: ignore[attr-defined]
    return int(cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name))
