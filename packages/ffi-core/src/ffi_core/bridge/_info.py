"""``KernelInfo``: what every bridge knows of a kernel it has validated.

A bridge subclasses it to add its language's facts (Numba's target options,
Warp's parameters); the fields here are the ones ffi-core reads: the names
messages and ``__name__`` use, the digest that names FFI targets, the
qualified name a catalog finds an exported kernel by, and the arity.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, TypeVar

from .._checks import positional_count
from .._digest import function_digest

__all__ = ["KernelInfo", "check_kernel_type", "function_kernel_fields", "kernel_digest"]


class KernelInfo:
    """A validated kernel, as the bridge kit reads it.

    Hashed and compared by identity (a primitive parameter): a bridge makes
    one per kernel object (see ``BridgeCatalog.info``).

    Args:
        name: the kernel's own name; the wrapped op's ``__name__``.
        label: the kernel in words for errors at lowering and run time, and in
            the op's ``__doc__`` (``"numba cuda kernel 'add'"``).
        qualname: module and qualified name, by which a catalog tells a
            changed kernel from an unknown one.
        digest: a hex digest of everything the compiled kernel depends on; it
            names the FFI targets (see ``kernel_digest``).
        n_params: positional parameters of the kernel, for the default arity
            check; None: not checked (any number, or the bridge checks).
        called: the kernel as argument checks name it (``"kernel 'add'"`` in
            "input 0 of kernel 'add'"); default ``label``.
        derivative_fix: what the refusal to differentiate the kernel says to
            do (``ffi_core.bridge.derivative_fix(route)``, naming the
            bridge's own way); None: the class's ``derivative_fix`` (a
            bridge's subclass may set it once for all its kernels), which is
            None here: JAX's way alone.

    Example:
        >>> info = KernelInfo(name="add", label="toy kernel 'add'", qualname="m.add", digest="ab")
        >>> info.called, info.n_params, info.derivative_fix
        ("toy kernel 'add'", None, None)
    """

    #: The fix text of the kernels of this class (see ``derivative_fix`` above).
    derivative_fix: str | None = None

    def __init__(
        self,
        *,
        name: str,
        label: str,
        qualname: str,
        digest: str,
        n_params: int | None = None,
        called: str | None = None,
        derivative_fix: str | None = None,
    ) -> None:
        self.name = name
        self.label = label
        self.qualname = qualname
        self.digest = digest
        self.n_params = n_params
        self.called = label if called is None else called
        if derivative_fix is not None:
            self.derivative_fix = derivative_fix

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.qualname})"


def kernel_digest(fn: Any, options: Mapping[str, Any] = {}) -> str:
    """The digest of a Python-defined kernel compiled with ``options``: its code
    and captured values (``ffi_core.bridge.function_digest``) and the options that
    change the compiled code, 24 hex digits.

    Example:
        >>> def add(x, y, out):
        ...     out[:] = x + y
        >>> len(kernel_digest(add))
        24
        >>> kernel_digest(add) == kernel_digest(add, {"fastmath": True})
        False
    """
    h = hashlib.sha256(function_digest(fn).encode())
    h.update(repr(sorted((k, repr(v)) for k, v in options.items())).encode())
    return h.hexdigest()[:24]


def function_kernel_fields(fn: Any, kind: str, options: Mapping[str, Any] = {}) -> dict[str, Any]:
    """``KernelInfo``'s fields for a kernel written as a Python function ``fn``
    (Numba's): named after ``fn``, labelled ``"<kind> '<name>'"``, digested
    with ``options`` (``kernel_digest``), every positional parameter an array.

    Example:
        >>> def add(x, y, out):
        ...     out[:] = x + y
        >>> info = KernelInfo(**function_kernel_fields(add, "toy kernel"))
        >>> info.label, info.called, info.n_params
        ("toy kernel 'add'", "kernel 'add'", 3)
    """
    name = fn.__name__
    return {
        "name": name,
        "label": f"{kind} '{name}'",
        "qualname": f"{fn.__module__}.{fn.__qualname__}",
        "digest": kernel_digest(fn, options),
        "n_params": positional_count(fn),
        "called": f"kernel '{name}'",
    }


_K = TypeVar("_K")


def check_kernel_type(
    kernel: object, accepted: type[_K], expected: str, elsewhere: Mapping[str, str] = {}
) -> _K:
    """``kernel``, if it is an ``accepted``; else a TypeError naming the argument.

    Args:
        kernel: the object a user passed as ``kernel``.
        accepted: the bridge's kernel type.
        expected: what the bridge takes, in words (``"a @numba.njit function
            (a numba CPU dispatcher)"``).
        elsewhere: type names of other languages' kernels, each with the
            bridge that takes it (a kernel of the wrong bridge is a common
            slip; the message says where it belongs).

    Example:
        >>> check_kernel_type("add", str, "a string")
        'add'
        >>> check_kernel_type(3, str, "a string", {"int": "an int use int_bridge.wrap"})
        Traceback (most recent call last):
        TypeError: `kernel` must be a string, got <class 'int'>; for an int use int_bridge.wrap
    """
    if isinstance(kernel, accepted):
        return kernel
    hint = elsewhere.get(type(kernel).__name__)
    raise TypeError(
        f"`kernel` must be {expected}, got {type(kernel)!r}" + (f"; for {hint}" if hint else "")
    )
