"""What a kernel call is: the kernel's identity and the dtype/rank signature.

One FFI target serves one (kernel, signature); shapes are read at run time, so
a signature never includes sizes. Everything here is checked before anything
is traced or bound.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from numba.core.registry import CPUDispatcher

__all__ = [
    "SUPPORTED_DTYPES",
    "VMAP_METHODS",
    "ArraySig",
    "CallSig",
    "KernelInfo",
    "array_sig",
    "check_dtype",
    "normalize_outs",
]

#: Dtypes a numba CPU kernel can take, by name. Not float16: Numba has no
#: float16 on CPU (any array of it fails inside Numba's lowering).
SUPPORTED_DTYPES: tuple[str, ...] = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "complex64",
    "complex128",
)

#: Accepted ``vmap_method`` values; None is the default, one native call looping
#: over the batch.
VMAP_METHODS: tuple[str | None, ...] = (
    None,
    "sequential",
    "sequential_unrolled",
    "expand_dims",
    "broadcast_all",
)


def check_dtype(dtype: Any, what: str) -> np.dtype:
    """``dtype`` as a numpy dtype, or a TypeError naming ``what``."""
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        resolved = None
    if resolved is None or resolved.name not in SUPPORTED_DTYPES:
        raise TypeError(
            f"{what} has dtype {dtype}, which numba CPU kernels do not take; "
            f"supported: {', '.join(SUPPORTED_DTYPES)}"
        )
    return resolved


@dataclasses.dataclass(frozen=True)
class ArraySig:
    """dtype and rank of one buffer."""

    dtype: str
    rank: int

    def __str__(self) -> str:
        return f"{self.dtype}[{self.rank}d]"


@dataclasses.dataclass(frozen=True)
class CallSig:
    """The signature a handler is generated for.

    ``batched`` is None for a plain call; for a folded vmap it says which
    inputs carry a leading batch axis (every output does). Ranks include that
    axis. ``context`` is appended to run-time error messages (it is part of
    the compiled handler, hence of the signature).
    """

    inputs: tuple[ArraySig, ...]
    outputs: tuple[ArraySig, ...]
    batched: tuple[bool, ...] | None = None
    context: str = ""

    def describe(self) -> str:
        ins = ", ".join(map(str, self.inputs)) or "none"
        outs = ", ".join(map(str, self.outputs))
        return f"inputs ({ins}) and outputs ({outs})"


def _value_digest(value: Any, h: Any) -> None:
    # Numba freezes closure variables into the compiled code, so two closures
    # made by one factory share bytecode but not behaviour: their values must
    # be part of the digest, or they would share one FFI target.
    if isinstance(value, np.ndarray):
        h.update(f"ndarray:{value.dtype.str}:{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, CPUDispatcher):
        h.update(f"dispatcher:{value.py_func.__module__}.{value.py_func.__qualname__}".encode())
        _function_digest(value.py_func, h)
    elif inspect.isfunction(value):
        h.update(f"function:{value.__module__}.{value.__qualname__}".encode())
        _function_digest(value, h)
    else:
        h.update(f"{type(value).__qualname__}:{value!r}".encode())


def _function_digest(fn: Any, h: Any) -> None:
    _code_digest(fn.__code__, h)
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            h.update(b"<empty cell>")
            continue
        _value_digest(value, h)


def _code_digest(code: Any, h: Any) -> None:
    h.update(code.co_code)
    for const in code.co_consts:
        if inspect.iscode(const):
            _code_digest(const, h)
        else:
            h.update(repr(const).encode())
    h.update(repr(code.co_names).encode())


class KernelInfo:
    """A validated ``@numba.njit`` kernel and a digest of its code.

    The digest (module, qualified name, bytecode, constants, closure values)
    names its FFI
    targets and on-disk handlers, so they are the same in every process.
    """

    def __init__(self, kernel: object) -> None:
        if not isinstance(kernel, CPUDispatcher):
            hint = ""
            if type(kernel).__name__ == "CUDADispatcher":
                hint = "; for a numba.cuda.jit kernel use numba_cuda_ffi.numba_cuda_kernel"
            raise TypeError(
                "`kernel` must be a @numba.njit function (a numba CPU dispatcher), "
                f"got {type(kernel)!r}{hint}"
            )
        self.kernel = kernel
        py_func = kernel.py_func
        self.name: str = py_func.__name__
        self.qualname = f"{py_func.__module__}.{py_func.__qualname__}"
        self.parallel: bool = bool(kernel.targetoptions.get("parallel", False))
        h = hashlib.sha256(self.qualname.encode())
        _function_digest(py_func, h)
        h.update(repr(sorted((k, repr(v)) for k, v in kernel.targetoptions.items())).encode())
        self.digest = h.hexdigest()[:24]
        self.n_params = _positional_count(py_func)

    def check_arity(self, n_in: int, n_out: int) -> None:
        if self.n_params is not None and self.n_params != n_in + n_out:
            raise TypeError(
                f"kernel '{self.name}' takes {self.n_params} arguments but is called with "
                f"{n_in} inputs and {n_out} outputs ({n_in + n_out} arrays); the convention "
                "is kernel(in_1, ..., in_n, out_1, ..., out_m)"
            )


def _positional_count(fn: Any) -> int | None:
    """Number of positional parameters, or None when ``*args`` takes any."""
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def normalize_outs(outs: Any) -> tuple[tuple[jax.ShapeDtypeStruct, ...], Any]:
    """Flatten ``outs`` (one ShapeDtypeStruct, a sequence or a pytree of them)
    into a tuple and a function rebuilding the caller's structure."""
    sds = jax.ShapeDtypeStruct
    if isinstance(outs, sds):
        return (outs,), lambda results: results[0]
    if isinstance(outs, Sequence) and not isinstance(outs, str):
        leaves = tuple(outs)
        for i, leaf in enumerate(leaves):
            if not isinstance(leaf, sds):
                raise TypeError(f"`outs[{i}]` must be a jax.ShapeDtypeStruct, got {type(leaf)!r}")
        return leaves, tuple
    if isinstance(outs, dict) or dataclasses.is_dataclass(outs):
        leaves, treedef = jax.tree.flatten(outs, is_leaf=lambda x: isinstance(x, sds))
        for leaf in leaves:
            if not isinstance(leaf, sds):
                raise TypeError(
                    "`outs` must be a jax.ShapeDtypeStruct or a sequence or pytree of them, "
                    f"got a leaf of {type(leaf)!r}"
                )
        return tuple(leaves), lambda results: jax.tree.unflatten(treedef, results)
    raise TypeError(
        f"`outs` must be a jax.ShapeDtypeStruct or a sequence or pytree of them, got {type(outs)!r}"
    )


def array_sig(aval: Any) -> ArraySig:
    return ArraySig(np.dtype(aval.dtype).name, len(aval.shape))
