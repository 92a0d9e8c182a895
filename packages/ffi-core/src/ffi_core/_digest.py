"""A digest of what a compiled kernel does, to name its FFI targets by content.

Numba compiles a function's bytecode together with the values it captures:
closure cells and the module globals it reads are frozen into the machine code.
Two functions with one bytecode but different captured values (closures made
by one factory, a kernel redefined after a global changed) therefore do
different things, and must not share an FFI target: the second would be taken
for the first, already registered, and silently run its code. The digest
covers the bytecode, the constants, and every captured value, recursively
through the functions and dispatchers it calls.
"""

from __future__ import annotations

import hashlib
import inspect
import re
import types
from typing import Any

import numpy as np

__all__ = ["address_bound_values", "function_digest"]

# "<Foo object at 0x7f...>", "<cdata 'double(*)(double)' 0x55...>": a repr
# holding a memory address, different in every process.
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def function_digest(fn: Any) -> str:
    """A hex digest of ``fn``'s code and of every value it captures.

    Covered: the module and qualified name, the bytecode and constants (nested
    code too), closure cells, and the module globals the code names, followed
    into the functions and Numba dispatchers (anything with a ``py_func``) they
    hold. Arrays count by dtype, shape and bytes, modules by name, other values
    by ``repr``. The digest is the same in every process for the same source
    and values, so target names derived from it survive ``jax.export`` and the
    persistent compilation cache.

    Example:
        >>> def make(scale):
        ...     def kernel(x):
        ...         return scale * x
        ...     return kernel
        >>> function_digest(make(2)) == function_digest(make(2))
        True
        >>> function_digest(make(2)) == function_digest(make(3))
        False
    """
    h = hashlib.sha256()
    _function(fn, h, set(), [])
    return h.hexdigest()


def address_bound_values(fn: Any) -> list[str]:
    """The values ``fn`` captures (as :func:`function_digest` follows them)
    that count by a ``repr`` holding a memory address, described.

    Their digest differs in every process, so a target named from it cannot be
    found again by ``jax.export`` or a persistent cache. Within one process it
    is still right: two such objects never share a digest.

    Example:
        >>> marker = object()
        >>> def kernel(x):
        ...     return marker
        >>> address_bound_values(kernel)
        ["global 'marker' read by 'kernel' = <object object at 0x...>"]
    """
    found: list[str] = []
    _function(fn, hashlib.sha256(), set(), found)
    return found


def _function(fn: Any, h: Any, seen: set[int], found: list[str]) -> None:
    h.update(f"function:{fn.__module__}.{fn.__qualname__}".encode())
    if id(fn) in seen:  # recursion: the name stands for it
        return
    seen.add(id(fn))
    code = fn.__code__
    _code(code, h)
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # a cell not yet filled
            h.update(b"<empty cell>")
            continue
        _value(value, h, seen, found, f"closure value read by {fn.__qualname__!r}")
    scope = getattr(fn, "__globals__", {})
    for name in sorted(_names(code)):
        if name in scope:
            h.update(f"global:{name}=".encode())
            _value(scope[name], h, seen, found, f"global {name!r} read by {fn.__qualname__!r}")


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _names(const)
    return names


def _code(code: types.CodeType, h: Any) -> None:
    h.update(code.co_code)
    for const in code.co_consts:
        if inspect.iscode(const):
            _code(const, h)
        else:
            h.update(repr(const).encode())
    h.update(repr(code.co_names).encode())


def _value(value: Any, h: Any, seen: set[int], found: list[str], where: str) -> None:
    if isinstance(value, types.ModuleType):
        h.update(f"module:{value.__name__}".encode())  # not repr: it holds a path
    elif isinstance(value, np.ndarray):
        h.update(f"ndarray:{value.dtype.str}:{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif inspect.isfunction(getattr(value, "py_func", None)):
        h.update(f"dispatcher:{type(value).__name__}".encode())
        _function(value.py_func, h, seen, found)
    elif inspect.isfunction(value):
        _function(value, h, seen, found)
    elif isinstance(value, type):
        h.update(f"type:{value.__module__}.{value.__qualname__}".encode())
    else:
        text = repr(value)
        if _ADDRESS.search(text):
            found.append(f"{where} = {_ADDRESS.sub('0x...', text)}")
        h.update(f"{type(value).__qualname__}:{text}".encode())
