"""A kernel's declared parameters: parsed, checked against the source's C++
parameter list, and a call's scalar values checked against their types.

A parameter is declared ``"in"`` / ``"in:dtype"`` (a pointer to the next
input), ``"out"`` / ``"out:dtype"`` (a pointer to the next output) or
``"name:dtype"`` (a scalar, a static keyword of each call that travels as an
FFI attribute).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ffi_core.abi import SUPPORTED_DTYPES
from ffi_core.bridge import scalar_value as check_scalar
from ffi_core.bridge.cuda import CTYPES

from ._signature import SourceParam, source_params

__all__ = [
    "ARRAY_DTYPES",
    "SCALAR_DTYPES",
    "Pointer",
    "parse_params",
    "scalar_value",
    "typed_pointers",
]

#: The dtypes an ``"in:dtype"`` / ``"out:dtype"`` pointer may declare.
ARRAY_DTYPES: tuple[str, ...] = tuple(SUPPORTED_DTYPES)

#: The dtypes a scalar parameter may declare: those XLA passes as attributes.
SCALAR_DTYPES: tuple[str, ...] = CTYPES


def parse_params(kernel: str, params: Any) -> tuple[tuple[str, str, str], ...]:
    """``params`` as ``(kind, name, dtype)``: ("in" or "out", "", dtype or "")
    for a pointer, (dtype, name, dtype) for a scalar."""
    if isinstance(params, str) or not isinstance(params, Sequence):
        raise TypeError(
            f"the parameters of kernel {kernel!r} must be a list of 'in', 'out' or "
            f"'name:dtype' strings, got {params!r}"
        )
    parsed = []
    for p in params:
        name, _, dtype = p.partition(":") if isinstance(p, str) else ("", "", "")
        if name in ("in", "out") and (not dtype or dtype in ARRAY_DTYPES):
            parsed.append((name, "", dtype))
            continue
        if name in ("in", "out"):
            raise ValueError(
                f"parameter {p!r} of kernel {kernel!r} declares the element type of a "
                f"pointer, which must be one of {', '.join(ARRAY_DTYPES)}"
            )
        if not name.isidentifier() or dtype not in SCALAR_DTYPES:
            raise ValueError(
                f"parameter {p!r} of kernel {kernel!r} must be 'in', 'out' or 'name:dtype' "
                f"with dtype one of {', '.join(SCALAR_DTYPES)}"
            )
        if any(name == n for _, n, _ in parsed):
            raise ValueError(
                f"kernel {kernel!r} declares the scalar parameter {name!r} twice; each scalar "
                "is passed by its name"
            )
        parsed.append((dtype, name, dtype))
    return tuple(parsed)


@dataclasses.dataclass(frozen=True)
class Pointer:
    """One pointer parameter: the ``position`` among all parameters, its name
    in the source (empty when unread) and its element dtype ("" unchecked)."""

    position: int
    name: str
    dtype: str

    def describe(self) -> str:
        named = f" {self.name!r}" if self.name else ""
        return f"parameter {self.position}{named}"


def typed_pointers(
    kernel: str, declared: tuple[tuple[str, str, str], ...], source: str
) -> tuple[tuple[Pointer, ...], tuple[Pointer, ...]]:
    """The input and output pointers of ``kernel``, with the types that its
    declaration and its C++ parameter list give (a ValueError where they differ)."""
    found = source_params(source, kernel)
    read: tuple[SourceParam | None, ...] = (
        found if found is not None and len(found) == len(declared) else (None,) * len(declared)
    )
    ins: list[Pointer] = []
    outs: list[Pointer] = []
    for position, ((kind, name, dtype), param) in enumerate(zip(declared, read, strict=True)):
        pointer = kind in ("in", "out")
        shown = f"{name or kind}:{dtype}" if dtype else kind
        if param is not None:
            what = None
            if param.pointer != pointer:
                what = "a pointer" if param.pointer else "not a pointer"
            elif dtype and param.dtype and param.dtype != dtype:
                what = f"a pointer to {param.dtype}" if pointer else param.dtype
            if what is not None:
                raise ValueError(
                    f"parameter {position} of kernel {kernel!r} is declared {shown!r}, but the "
                    f"source declares `{param.text}` ({what})"
                )
        if pointer:
            element = dtype or (param.dtype if param is not None and param.dtype else "")
            if element not in ARRAY_DTYPES:
                element = ""  # a type arrays do not come in (e.g. char*): unchecked
            entry = Pointer(position, param.name if param is not None else "", element)
            (ins if kind == "in" else outs).append(entry)
    return tuple(ins), tuple(outs)


def scalar_value(label: str, name: str, dtype: str, value: Any) -> Any:
    """``value`` checked against scalar parameter ``name``'s declared ``dtype``
    (``ffi_core.bridge.scalar_value``), as a Python number."""
    return check_scalar(value, dtype, f"{label}: scalar {name!r}").item()
