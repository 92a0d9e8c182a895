"""What a kernel call is: the kernel, the dtype/rank signature, the outputs.

One FFI target serves one (kernel, signature, launch); sizes are read from the
call frame at run time, so a signature never includes them. Everything here is
checked before anything is traced or bound.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import operator
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from ._runtime import numba_cuda

__all__ = [
    "CALLABLE_VMAP_METHODS",
    "SUPPORTED_DTYPES",
    "VMAP_METHODS",
    "ArraySig",
    "CallSig",
    "KernelInfo",
    "array_sig",
    "check_aliases",
    "check_dtype",
    "check_inputs",
    "normalize_outs",
]

#: Dtypes a numba CUDA kernel takes, by name.
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
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)

#: ``vmap_method`` of ``numba_cuda_kernel``. None (default): one native call
#: launching the kernel once per batch element. ``"sequential"`` /
#: ``"sequential_unrolled"``: an XLA loop of calls. ``"fold"``: the caller
#: declares the kernel row-independent along axis 0, and one launch covers the
#: batch folded into axis 0 with launch axis x scaled by the batch size.
VMAP_METHODS: tuple[str | None, ...] = (None, "sequential", "sequential_unrolled", "fold")

#: ``vmap_method`` of ``numba_cuda_callable`` (jax.ffi's methods; None is
#: ``"sequential"``: the function sees one batch element per call).
CALLABLE_VMAP_METHODS: tuple[str | None, ...] = (
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
            f"{what} has dtype {dtype}, which numba CUDA kernels do not take; "
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

    ``batched`` is None for a plain call; for a batch launched element by
    element it says which inputs carry a leading batch axis (every output
    does). Ranks include that axis; the kernel is compiled without it.
    """

    inputs: tuple[ArraySig, ...]
    outputs: tuple[ArraySig, ...]
    batched: tuple[bool, ...] | None = None

    @property
    def kernel_arrays(self) -> tuple[ArraySig, ...]:
        """The arrays as the kernel sees them (without a batch axis)."""
        flags = self.batched or (False,) * len(self.inputs)
        ins = tuple(
            ArraySig(a.dtype, a.rank - 1) if b else a
            for a, b in zip(self.inputs, flags, strict=True)
        )
        outs = self.outputs
        if self.batched is not None:
            outs = tuple(ArraySig(a.dtype, a.rank - 1) for a in outs)
        return ins + outs

    def describe(self) -> str:
        ins = ", ".join(map(str, self.inputs)) or "none"
        outs = ", ".join(map(str, self.outputs))
        return f"inputs ({ins}) and outputs ({outs})"


def _code_digest(code: Any, h: Any) -> None:
    h.update(code.co_code)
    for const in code.co_consts:
        if inspect.iscode(const):
            _code_digest(const, h)
        else:
            h.update(repr(const).encode())
    h.update(repr(code.co_names).encode())


def _positional_count(fn: Any) -> int | None:
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


# Target options that change the generated code; others (extensions) do not.
_CODE_OPTIONS = ("debug", "lineinfo", "fastmath", "opt", "launch_bounds", "max_registers")


class KernelInfo:
    """A validated ``@cuda.jit`` kernel and a digest of its code, which names
    its FFI targets so they are the same in every process."""

    def __init__(self, kernel: object) -> None:
        cuda = numba_cuda()
        from numba.cuda.dispatcher import CUDADispatcher

        del cuda
        if not isinstance(kernel, CUDADispatcher):
            hint = ""
            if type(kernel).__name__ == "CPUDispatcher":
                hint = "; for a @numba.njit kernel use numba_cpu_ffi.numba_kernel"
            raise TypeError(
                "`kernel` must be a @numba.cuda.jit kernel (a numba CUDA dispatcher), "
                f"got {type(kernel)!r}{hint}"
            )
        options = kernel.targetoptions
        py_func = kernel.py_func
        self.name: str = py_func.__name__
        if options.get("device"):
            raise TypeError(
                f"`kernel` '{self.name}' is a device function (@cuda.jit(device=True)); "
                "wrap a kernel, which device functions can be called from"
            )
        if options.get("link"):
            raise NotImplementedError(
                f"kernel '{self.name}' links external code (`link=`), which numba_cuda_kernel "
                "does not load; launch it from numba_cuda_ffi.numba_cuda_callable instead"
            )
        self.kernel = kernel
        self.py_func = py_func
        self.qualname = f"{py_func.__module__}.{py_func.__qualname__}"
        self.options = {k: options.get(k) for k in _CODE_OPTIONS}
        h = hashlib.sha256(self.qualname.encode())
        _code_digest(py_func.__code__, h)
        h.update(repr(sorted((k, repr(v)) for k, v in self.options.items())).encode())
        self.digest = h.hexdigest()[:24]
        self.n_params = _positional_count(py_func)

    def check_arity(self, n_in: int, n_out: int) -> None:
        if self.n_params is not None and self.n_params != n_in + n_out:
            raise TypeError(
                f"kernel '{self.name}' takes {self.n_params} arguments but is called with "
                f"{n_in} inputs and {n_out} outputs ({n_in + n_out} arrays); the convention "
                "is kernel(in_1, ..., in_n, out_1, ..., out_m)"
            )


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


def out_avals(outs: Any) -> tuple[tuple[Any, ...], Any]:
    """The output avals of ``outs`` (checked) and the rebuilding function."""
    from jax import core as jax_core

    structs, rebuild = normalize_outs(outs)
    if not structs:
        raise ValueError("`outs` must hold at least one jax.ShapeDtypeStruct, got none")
    avals = tuple(
        jax_core.ShapedArray(tuple(s.shape), check_dtype(s.dtype, f"`outs` entry {k} ({s})"))
        for k, s in enumerate(structs)
    )
    return avals, rebuild


def check_aliases(aliases: Any, n_outs: int) -> tuple[tuple[int, int], ...]:
    """``input_output_aliases`` as sorted (input, output) pairs."""
    if aliases is None:
        return ()
    if not isinstance(aliases, dict):
        raise TypeError(
            "`input_output_aliases` must be a dict {input index: output index}, "
            f"got {type(aliases)!r}"
        )
    pairs = []
    for i, j in aliases.items():
        for what, value in (("input", i), ("output", j)):
            if isinstance(value, bool):
                raise TypeError(
                    f"`input_output_aliases` {what} indices must be ints, got {value!r}"
                )
            try:
                operator.index(value)
            except TypeError:
                raise TypeError(
                    f"`input_output_aliases` {what} indices must be ints, got {value!r}"
                ) from None
        if i < 0:
            raise ValueError(f"`input_output_aliases` input indices must be >= 0, got {i}")
        if not 0 <= j < n_outs:
            raise ValueError(
                f"`input_output_aliases` maps input {i} to output {j}, but there are "
                f"{n_outs} outputs (valid: 0 to {n_outs - 1})"
            )
        pairs.append((int(i), int(j)))
    outputs = [j for _, j in pairs]
    if len(set(outputs)) != len(outputs):
        raise ValueError(f"`input_output_aliases` maps several inputs to one output: {dict(pairs)}")
    return tuple(sorted(pairs))


def check_inputs(
    name: str, args: Sequence[Any], avals: Sequence[Any], aliases: Sequence[tuple[int, int]]
) -> None:
    """Inputs are arrays of supported dtypes, and aliased pairs match."""
    for i, x in enumerate(args):
        if not isinstance(x, jax.Array | np.ndarray | np.generic):
            raise TypeError(
                f"input {i} of {name} must be an array (jax.Array or numpy.ndarray), "
                f"got {type(x)!r}"
            )
        check_dtype(x.dtype, f"input {i} of {name}")
    for i, j in aliases:
        if i >= len(args):
            valid = f"0 to {len(args) - 1}" if args else "none"
            raise ValueError(
                f"`input_output_aliases` maps input {i} to output {j}, but {name} is "
                f"called with {len(args)} inputs (valid: {valid})"
            )
        x, o = args[i], avals[j]
        if tuple(x.shape) != o.shape or np.dtype(x.dtype) != o.dtype:
            raise ValueError(
                f"`input_output_aliases` maps input {i} ({np.dtype(x.dtype).name}"
                f"{list(x.shape)}) to output {j} ({o.dtype.name}{list(o.shape)}); "
                "aliased buffers must have the same shape and dtype"
            )


def array_sig(aval: Any) -> ArraySig:
    return ArraySig(np.dtype(aval.dtype).name, len(aval.shape))
