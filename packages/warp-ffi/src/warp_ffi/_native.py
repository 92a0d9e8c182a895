"""Native pieces of the generated handlers: Warp's C structs filled from XLA buffers.

The layouts come from Warp's own ctypes descriptions (``array_t`` and the
launch-bounds classes in ``warp._src.types``), the one description of Warp's
ABI here; tests/test_layout.py checks them against the C++ header Warp ships.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numba
import numpy as np
from ffi_core.abi.native import buffer_data, buffer_dim, buffer_rank, load, store, voidptr
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ._warp import wp_types

__all__ = ["ARRAY_T", "bounds_layout", "call_message_fn", "fill_array", "zero_buffer"]

# Its fields' offsets are read from the class (ctypes descriptors), which Warp's types
# annotate as instance fields only.
ARRAY_T: Any = wp_types.array_t
_DATA = ARRAY_T.data.offset
_GRAD = ARRAY_T.grad.offset
_SHAPE = ARRAY_T.shape.offset
_STRIDES = ARRAY_T.strides.offset
_NDIM = ARRAY_T.ndim.offset
_INT = ctypes.sizeof(ctypes.c_int32)

_inline = numba.njit(inline="always", cache=False)


def bounds_layout(kernel_dim: int) -> tuple[int, int, int, int]:
    """``(sizeof, offset of shape, of size, of coord_mult)`` of
    ``wp::launch_bounds_t<kernel_dim>``."""
    cls = wp_types._launch_bounds_classes[kernel_dim]
    return ctypes.sizeof(cls), cls.shape.offset, cls.size.offset, cls.coord_mult.offset


@_inline
def fill_array(slot, buf, itemsize, ndim, lead):
    """Fill the ``wp::array_t`` at ``slot`` with XLA buffer ``buf`` (row-major,
    dims after the first ``lead`` ones); returns the bytes of one such array,
    the step between rows of a batch."""
    store(slot + _DATA, buffer_data(buf), types.uint64)
    store(slot + _GRAD, 0, types.uint64)
    stride = itemsize
    for d in range(ndim - 1, -1, -1):
        n = buffer_dim(buf, d + lead)
        store(slot + _SHAPE + _INT * d, n, types.int32)
        store(slot + _STRIDES + _INT * d, stride, types.int32)
        stride *= n
    store(slot + _NDIM, ndim, types.uint16)
    return stride


@_inline
def zero_buffer(buf, itemsize):
    """Set every byte of XLA buffer ``buf`` to zero."""
    nbytes = itemsize
    for d in range(buffer_rank(buf)):
        nbytes *= buffer_dim(buf, d)
    if nbytes > 0:
        carray = numba.carray(voidptr(buffer_data(buf)), (nbytes,), np.uint8)
        carray[:] = 0


@_inline
def copy_scalar(dst, src, width):
    """Copy a scalar of ``width`` bytes (1, 2, 4 or 8)."""
    if width == 1:
        store(dst, load(src, types.uint8), types.uint8)
    elif width == 2:
        store(dst, load(src, types.uint16), types.uint16)
    elif width == 4:
        store(dst, load(src, types.uint32), types.uint32)
    else:
        store(dst, load(src, types.uint64), types.uint64)


@intrinsic
def call_message_fn(typingctx, fn):
    """``((const char* (*)(void))fn)()``: a C function taking nothing and
    returning a message or NULL (Warp's ``wp_take_cpu_block_error``), as an
    integer address."""
    sig = types.uintp(fn)

    def codegen(context, builder, sig, args):
        i8p = ir.IntType(8).as_pointer()
        callee = builder.inttoptr(args[0], ir.FunctionType(i8p, []).as_pointer())
        return builder.ptrtoint(builder.call(callee, []), context.get_value_type(types.uintp))

    return sig, codegen
