"""How a kernel's parameters are made from a call frame: the parameter layout.

``cuLaunchKernel`` takes one pointer per kernel parameter, each to that
parameter's bytes. The launcher keeps every parameter in one storage block on
the handler's stack and fills it from the call frame before each launch. A
:class:`ParamLayout` says where each parameter lies in that block and what
each of its fields holds: a buffer's device pointer, one of its sizes or
strides, its element count, a constant, or a scalar attribute of the call.
Every GPU bridge describes its kernels' ABI this way (Numba's array structs,
Triton's bare pointers, Warp's ``array_t`` structs, plain CUDA C++ arguments),
and one handler generator serves them all.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..._spec import BASIC_DTYPES

__all__ = ["CTYPES", "SOURCES", "Field", "LayoutBuilder", "ParamLayout"]

#: The field types a layout may store, as numpy dtype names: also the scalar
#: parameters a kernel can take as FFI attributes (``ffi_core.bridge.BASIC_DTYPES``).
CTYPES: tuple[str, ...] = BASIC_DTYPES

#: Where a field's value comes from:
#:  ``data``: the device pointer of buffer ``buffer`` (this batch element's);
#:  ``dim``: size ``axis`` of buffer ``buffer`` as the kernel sees it (the
#:  batch axis of a batched call excluded);
#:  ``stride``: the C-contiguous stride of ``axis``, times ``value`` (the item
#:  size for strides in bytes, 1 for strides in elements);
#:  ``nitems``: the buffer's element count, as the kernel sees it;
#:  ``const``: ``value``;
#:  ``attr``: the call's scalar attribute ``name``.
SOURCES = ("data", "dim", "stride", "nitems", "const", "attr")


@dataclasses.dataclass(frozen=True)
class Field:
    """One value written into the parameter storage at ``offset``, as ``ctype``."""

    offset: int
    ctype: str
    source: str
    buffer: int = -1
    axis: int = -1
    value: int | float = 0
    name: str = ""

    def __post_init__(self) -> None:
        if self.ctype not in CTYPES:
            raise ValueError(f"field type must be one of {CTYPES}, got {self.ctype!r}")
        if self.source not in SOURCES:
            raise ValueError(f"field source must be one of {SOURCES}, got {self.source!r}")

    @property
    def width(self) -> int:
        return np.dtype(self.ctype).itemsize


@dataclasses.dataclass(frozen=True)
class ParamLayout:
    """Each kernel parameter's ``(offset, size)`` in the storage block, the
    fields that fill it, the block's size, and the scalar attributes the call
    carries as ``(name, dtype)`` sorted by name (XLA's order)."""

    params: tuple[tuple[int, int], ...]
    fields: tuple[Field, ...]
    size: int
    attrs: tuple[tuple[str, str], ...] = ()

    @property
    def param_sizes(self) -> tuple[int, ...]:
        """The byte size of each parameter, to check against the PTX's."""
        return tuple(size for _, size in self.params)


def _align(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment


class LayoutBuilder:
    """Builds a :class:`ParamLayout` parameter by parameter, in kernel order.

    Example:
        >>> b = LayoutBuilder()
        >>> b.pointer(0)          # const float* x: input 0's data
        0
        >>> b.scalar("alpha", "float32")
        8
        >>> b.dims(1, 1, "int32")  # int n: output 0's length, as int32
        12
        >>> layout = b.build()
        >>> layout.param_sizes, layout.size, layout.attrs
        ((8, 4, 4), 16, (('alpha', 'float32'),))
    """

    def __init__(self) -> None:
        self._params: list[tuple[int, int]] = []
        self._fields: list[Field] = []
        self._attrs: dict[str, str] = {}
        self._end = 0

    def param(self, size: int, alignment: int | None = None) -> int:
        """A parameter of ``size`` bytes (aligned to ``alignment``, default its
        size up to 8); returns its offset. Fill it with :meth:`field`."""
        if size <= 0:
            raise ValueError(f"a kernel parameter has a positive size, got {size}")
        offset = _align(self._end, alignment or min(size, 8))
        self._params.append((offset, size))
        self._end = offset + size
        return offset

    def field(self, offset: int, ctype: str, source: str, **where: Any) -> None:
        """Write a value from ``source`` (see ``SOURCES``) at ``offset``."""
        field = Field(offset, ctype, source, **where)
        if source == "attr":
            known = self._attrs.setdefault(field.name, ctype)
            if known != ctype:
                raise ValueError(f"attribute {field.name!r} is used as {known} and as {ctype}")
        self._fields.append(field)

    def pointer(self, buffer: int) -> int:
        """A parameter holding buffer ``buffer``'s device pointer."""
        offset = self.param(8)
        self.field(offset, "uint64", "data", buffer=buffer)
        return offset

    def scalar(self, name: str, dtype: str) -> int:
        """A parameter holding the call's scalar attribute ``name`` of ``dtype``."""
        offset = self.param(np.dtype(dtype).itemsize)
        self.field(offset, dtype, "attr", name=name)
        return offset

    def constant(self, value: int | float, ctype: str) -> int:
        """A parameter holding a constant."""
        offset = self.param(np.dtype(ctype).itemsize)
        self.field(offset, ctype, "const", value=value)
        return offset

    def dims(self, buffer: int, axis: int, ctype: str = "int64") -> int:
        """A parameter holding size ``axis`` of buffer ``buffer``."""
        offset = self.param(np.dtype(ctype).itemsize)
        self.field(offset, ctype, "dim", buffer=buffer, axis=axis)
        return offset

    def build(self) -> ParamLayout:
        attrs = tuple(sorted(self._attrs.items()))
        return ParamLayout(tuple(self._params), tuple(self._fields), _align(self._end, 8), attrs)
