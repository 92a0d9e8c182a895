"""What a kernel call is: its dtype/rank signature, and the checks of its arguments.

One FFI target serves one (kernel, signature); sizes are read from the call
frame at run time, so a signature never includes them. The checks here run in
a bridge's public function, before anything is traced or bound; each names the
argument, the value it got and what is accepted.
"""

from __future__ import annotations

import dataclasses
import inspect
import operator
from collections.abc import Callable, Collection, Sequence
from typing import Any

import jax
import numpy as np
from jax import core as jax_core

__all__ = [
    "VMAP_METHODS",
    "ArraySig",
    "CallSig",
    "KernelDTypes",
    "array_sig",
    "check_aliases",
    "check_arity",
    "check_dtype",
    "check_inputs",
    "check_vmap_method",
    "is_output_spec",
    "normalize_outs",
    "output_avals",
    "positional_count",
]


@dataclasses.dataclass(frozen=True)
class ArraySig:
    """The dtype (by name) and rank of one buffer.

    Example:
        >>> sig = ArraySig("float32", 2)
        >>> str(sig)
        'float32[2d]'
        >>> sig
        ArraySig(dtype='float32', rank=2)
    """

    dtype: str
    rank: int

    def __str__(self) -> str:
        return f"{self.dtype}[{self.rank}d]"


@dataclasses.dataclass(frozen=True)
class CallSig:
    """The signature a handler is generated for: the inputs and outputs.

    ``batched`` is None for a plain call; for a call that runs a batch it says
    which inputs carry a leading batch axis (every output does). Ranks include
    that axis. Its ``repr`` names FFI targets, so it depends only on the
    fields. A bridge subclasses it (keeping the name ``CallSig``) to add what
    else its handler is generated for.

    Example:
        >>> f32 = ArraySig("float32", 1)
        >>> sig = CallSig((f32, ArraySig("int32", 0)), (f32,))
        >>> sig.describe()
        'inputs (float32[1d], int32[0d]) and outputs (float32[1d])'
        >>> CallSig((f32,), (f32,), (True,))
        CallSig(inputs=(ArraySig(dtype='float32', rank=1),), outputs=(ArraySig(dtype='float32', rank=1),), batched=(True,))
    """

    inputs: tuple[ArraySig, ...]
    outputs: tuple[ArraySig, ...]
    batched: tuple[bool, ...] | None = None

    def describe(self) -> str:
        """The inputs and outputs in words, for error messages."""
        ins = ", ".join(map(str, self.inputs)) or "none"
        outs = ", ".join(map(str, self.outputs))
        return f"inputs ({ins}) and outputs ({outs})"


def array_sig(aval: Any) -> ArraySig:
    """The ``ArraySig`` of anything with ``dtype`` and ``shape`` (an aval, an array).

    Example:
        >>> import numpy as np
        >>> array_sig(np.zeros((2, 3), np.float64))
        ArraySig(dtype='float64', rank=2)
    """
    return ArraySig(np.dtype(aval.dtype).name, len(aval.shape))


#: The ``vmap_method`` values every bridge accepts: None (one native call
#: over the batch), an XLA loop of calls (``"sequential"``,
#: ``"sequential_unrolled"``), or the kernel given the batch as a leading axis
#: of every array (``"expand_dims"``, ``"broadcast_all"``, as in
#: ``jax.ffi.ffi_call``). A bridge with more declares
#: ``(*ffi_core.VMAP_METHODS, "fold")``.
VMAP_METHODS: tuple[str | None, ...] = (
    None,
    "sequential",
    "sequential_unrolled",
    "expand_dims",
    "broadcast_all",
)


def check_vmap_method(vmap_method: Any, *, accepted: Sequence[str | None] = VMAP_METHODS) -> None:
    """A ValueError unless ``vmap_method`` is one of ``accepted``.

    Example:
        >>> check_vmap_method("sequential")
        >>> check_vmap_method("loop")
        Traceback (most recent call last):
        ValueError: `vmap_method` must be one of None, 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', got 'loop'
    """
    if vmap_method not in accepted:
        raise ValueError(
            f"`vmap_method` must be one of {', '.join(map(repr, accepted))}, got {vmap_method!r}"
        )


@dataclasses.dataclass(frozen=True)
class KernelDTypes:
    """The dtypes a bridge's kernels take, and those kernels as messages name them.

    Attributes:
        names: the accepted dtype names, in the order messages list them.
        kernels: the kernels as a plural noun, completing "which ... do not
            take" (``"numba CPU kernels"``, ``"Triton kernels"``).

    Example:
        >>> table = KernelDTypes(("float32", "int32"), "example kernels")
        >>> check_dtype("float16", "`x`", accepted=table)
        Traceback (most recent call last):
        TypeError: `x` has dtype float16, which example kernels do not take; supported: float32, int32
    """

    names: tuple[str, ...]
    kernels: str


def _dtype_table(accepted: Sequence[str] | KernelDTypes, kind: str | None) -> KernelDTypes:
    if isinstance(accepted, KernelDTypes):
        return accepted
    return KernelDTypes(tuple(accepted), f"{kind} kernels")


def check_dtype(
    dtype: Any, what: str, *, accepted: Sequence[str] | KernelDTypes, kind: str | None = None
) -> np.dtype:
    """``dtype`` as a numpy dtype, or a TypeError naming ``what``.

    Args:
        dtype: anything ``numpy.dtype`` accepts.
        what: the argument in words, for the message (``"input 0 of kernel 'add'"``).
        accepted: the bridge's ``KernelDTypes``; or the dtype names the
            kernels take, with ``kind``.
        kind: with a sequence of names, the kernels as an adjective
            (``"numba CPU"``: "which numba CPU kernels do not take").

    Raises:
        TypeError: ``dtype`` is not a dtype or not one of ``accepted``.

    Example:
        >>> check_dtype("float32", "`x`", accepted=("float32", "int32"), kind="example")
        dtype('float32')
        >>> check_dtype("float16", "`x`", accepted=("float32", "int32"), kind="example")
        Traceback (most recent call last):
        TypeError: `x` has dtype float16, which example kernels do not take; supported: float32, int32
    """
    table = _dtype_table(accepted, kind)
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        resolved = None
    if resolved is None or resolved.name not in table.names:
        raise TypeError(
            f"{what} has dtype {dtype}, which {table.kernels} do not take; "
            f"supported: {', '.join(table.names)}"
        )
    return resolved


# What one output of ``outs`` may be, in the words of every message that refuses one.
_OUTPUT_SPEC = (
    "an object with `shape` and `dtype` (a jax.ShapeDtypeStruct, a jax.core.ShapedArray, an array)"
)


def is_output_spec(value: Any) -> bool:
    """Whether ``value`` describes one output: anything with ``shape`` and ``dtype``.

    Example:
        >>> import jax
        >>> is_output_spec(jax.ShapeDtypeStruct((2,), "float32")), is_output_spec([])
        (True, False)
    """
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _as_struct(spec: Any, where: str) -> jax.ShapeDtypeStruct:
    if isinstance(spec, jax.ShapeDtypeStruct):
        return spec
    try:
        return jax.ShapeDtypeStruct(tuple(spec.shape), spec.dtype)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{where} must be {_OUTPUT_SPEC}, got {type(spec)!r} whose shape "
            f"{spec.shape!r} and dtype {spec.dtype!r} do not describe an array: {exc}"
        ) from None


def normalize_outs(
    outs: Any,
) -> tuple[tuple[jax.ShapeDtypeStruct, ...], Callable[[Sequence[Any]], Any]]:
    """Flatten ``outs`` into a tuple of ``jax.ShapeDtypeStruct``, and a function
    rebuilding the caller's structure.

    ``outs`` is one output spec (anything with ``shape`` and ``dtype``, as
    ``jax.ffi.ffi_call`` takes: a ``jax.ShapeDtypeStruct``, a
    ``jax.core.ShapedArray``, an array), or a sequence or pytree of them.

    Raises:
        TypeError: ``outs`` or one of its leaves is not an output spec.

    Example:
        >>> import jax
        >>> a = jax.ShapeDtypeStruct((2,), "float32")
        >>> structs, rebuild = normalize_outs({"x": a, "y": jax.core.ShapedArray((3,), "int32")})
        >>> structs[1], rebuild((1, 2))
        (ShapeDtypeStruct(shape=(3,), dtype=int32), {'x': 1, 'y': 2})
        >>> normalize_outs(a)[1]((1,))
        1
    """
    if is_output_spec(outs):
        return (_as_struct(outs, "`outs`"),), lambda results: results[0]
    if isinstance(outs, Sequence) and not isinstance(outs, str):
        leaves = tuple(outs)
        for i, leaf in enumerate(leaves):
            if not is_output_spec(leaf):
                raise TypeError(f"`outs[{i}]` must be {_OUTPUT_SPEC}, got {type(leaf)!r}")
        return tuple(_as_struct(leaf, f"`outs[{i}]`") for i, leaf in enumerate(leaves)), tuple
    if isinstance(outs, dict) or dataclasses.is_dataclass(outs):
        leaves, treedef = jax.tree.flatten(outs, is_leaf=is_output_spec)
        for leaf in leaves:
            if not is_output_spec(leaf):
                raise TypeError(
                    f"`outs` must be {_OUTPUT_SPEC} or a sequence or pytree of them, "
                    f"got a leaf of {type(leaf)!r}"
                )
        structs = tuple(_as_struct(leaf, "a leaf of `outs`") for leaf in leaves)
        return structs, lambda results: jax.tree.unflatten(treedef, results)
    raise TypeError(
        f"`outs` must be {_OUTPUT_SPEC} or a sequence or pytree of them, got {type(outs)!r}"
    )


def output_avals(
    outs: Any, *, accepted: Sequence[str] | KernelDTypes, kind: str | None = None
) -> tuple[tuple[jax_core.ShapedArray, ...], Callable[[Sequence[Any]], Any]]:
    """The output avals of ``outs`` (checked), and the function rebuilding
    the caller's structure from a tuple of results (see ``normalize_outs``).

    Args:
        outs: as in ``normalize_outs``.
        accepted, kind: as in ``check_dtype``.

    Raises:
        ValueError: ``outs`` holds no ``jax.ShapeDtypeStruct``.
        TypeError: as in ``normalize_outs`` and ``check_dtype``.

    Example:
        >>> import jax
        >>> avals, rebuild = output_avals(
        ...     [jax.ShapeDtypeStruct((2, 3), "float32")], accepted=("float32",), kind="example"
        ... )
        >>> avals
        (ShapedArray(float32[2,3]),)
    """
    structs, rebuild = normalize_outs(outs)
    if not structs:
        raise ValueError("`outs` must hold at least one jax.ShapeDtypeStruct, got none")
    avals = tuple(
        jax_core.ShapedArray(
            tuple(s.shape),
            check_dtype(s.dtype, f"`outs` entry {k} ({s})", accepted=accepted, kind=kind),
        )
        for k, s in enumerate(structs)
    )
    return avals, rebuild


def positional_count(fn: Callable[..., Any]) -> int | None:
    """How many positional arguments ``fn`` takes, or None when any number
    will do (``*args``) or Python cannot read its signature.

    Example:
        >>> positional_count(lambda x, y, out, *, scale=1.0: None)
        3
        >>> positional_count(lambda *arrays: None) is None
        True
    """
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def check_arity(n_params: int | None, n_in: int, n_out: int, *, name: str) -> None:
    """Check that a kernel taking ``n_params`` arguments (from
    ``positional_count``; None accepts any number) can be called with ``n_in``
    inputs and ``n_out`` outputs, as ``kernel(in_1, ..., in_n, out_1, ..., out_m)``.

    Raises:
        TypeError: the counts differ.

    Example:
        >>> check_arity(3, 2, 1, name="kernel 'add'")
        >>> check_arity(3, 1, 1, name="kernel 'add'")
        Traceback (most recent call last):
        TypeError: kernel 'add' takes 3 arguments but is called with 1 inputs and 1 outputs (2 arrays); the convention is kernel(in_1, ..., in_n, out_1, ..., out_m)
    """
    if n_params is not None and n_params != n_in + n_out:
        raise TypeError(
            f"{name} takes {n_params} arguments but is called with {n_in} inputs and "
            f"{n_out} outputs ({n_in + n_out} arrays); the convention is "
            "kernel(in_1, ..., in_n, out_1, ..., out_m)"
        )


def _check_index(what: str, value: Any) -> int:
    # bool is an int to Python, but True as an index is a mistake.
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"`input_output_aliases` {what} indices must be ints, got {value!r}")


def check_aliases(aliases: Any, n_outs: int) -> tuple[tuple[int, int], ...]:
    """``input_output_aliases`` as sorted ``(input, output)`` pairs.

    Everything that does not depend on the inputs is checked here, when a
    kernel is wrapped: the type, negative indices, output indices beyond
    ``n_outs`` and several inputs on one output. The rest (an input index
    beyond the inputs given, a shape or dtype that differs) is checked per
    call by ``check_inputs``.

    Args:
        aliases: ``{input index: output index}``, or None for none.
        n_outs: the number of outputs.

    Raises:
        TypeError: ``aliases`` is not a dict, or an index is not an int.
        ValueError: an index is out of range, or two inputs share an output.

    Example:
        >>> check_aliases({2: 0, 0: 1}, 2)
        ((0, 1), (2, 0))
        >>> check_aliases(None, 1)
        ()
        >>> check_aliases({0: 0, 1: 0}, 1)
        Traceback (most recent call last):
        ValueError: `input_output_aliases` maps several inputs to one output: {0: 0, 1: 0}
    """
    if aliases is None:
        return ()
    if not isinstance(aliases, dict):
        raise TypeError(
            "`input_output_aliases` must be a dict {input index: output index}, "
            f"got {type(aliases)!r}"
        )
    pairs = []
    for key, value in aliases.items():
        i, j = _check_index("input", key), _check_index("output", value)
        if i < 0:
            raise ValueError(f"`input_output_aliases` input indices must be >= 0, got {i}")
        if not 0 <= j < n_outs:
            raise ValueError(
                f"`input_output_aliases` maps input {i} to output {j}, but there are "
                f"{n_outs} outputs (valid: 0 to {n_outs - 1})"
            )
        pairs.append((i, j))
    outputs = [j for _, j in pairs]
    if len(set(outputs)) != len(outputs):
        raise ValueError(f"`input_output_aliases` maps several inputs to one output: {dict(pairs)}")
    return tuple(sorted(pairs))


def check_inputs(
    args: Sequence[Any],
    out_avals: Sequence[Any],
    aliases: Collection[tuple[int, int]],
    *,
    name: str,
    accepted: Sequence[str] | KernelDTypes,
    kind: str | None = None,
) -> None:
    """Check the inputs of one call: arrays of accepted dtypes, and aliased
    pairs (from ``check_aliases``) that exist and match in shape and dtype.

    Args:
        args: the inputs.
        out_avals: the outputs' avals (anything with ``shape`` and ``dtype``).
        aliases: ``(input, output)`` pairs from ``check_aliases``.
        name: what is called, for the messages (``"kernel 'add'"``).
        accepted, kind: as in ``check_dtype``.

    Raises:
        TypeError: an input is not an array, or its dtype is not accepted.
        ValueError: an aliased input is missing or differs from its output.

    Example:
        >>> import numpy as np
        >>> x = np.zeros(3, np.float32)
        >>> check_inputs([x], [x], [(0, 0)], name="kernel 'f'", accepted=("float32",), kind="example")
        >>> check_inputs([x[:2]], [x], [(0, 0)], name="kernel 'f'", accepted=("float32",), kind="example")
        Traceback (most recent call last):
        ValueError: `input_output_aliases` maps input 0 (float32[2]) to output 0 (float32[3]); aliased buffers must have the same shape and dtype
    """
    for i, x in enumerate(args):
        if not isinstance(x, jax.Array | np.ndarray | np.generic):
            raise TypeError(
                f"input {i} of {name} must be an array (jax.Array or numpy.ndarray), "
                f"got {type(x)!r}"
            )
        check_dtype(x.dtype, f"input {i} of {name}", accepted=accepted, kind=kind)
    for i, j in aliases:
        if i >= len(args):
            valid = f"0 to {len(args) - 1}" if args else "none"
            raise ValueError(
                f"`input_output_aliases` maps input {i} to output {j}, but {name} is "
                f"called with {len(args)} inputs (valid: {valid})"
            )
        x, o = args[i], out_avals[j]
        if tuple(x.shape) != tuple(o.shape) or np.dtype(x.dtype) != np.dtype(o.dtype):
            raise ValueError(
                f"`input_output_aliases` maps input {i} ({np.dtype(x.dtype).name}"
                f"{list(x.shape)}) to output {j} ({np.dtype(o.dtype).name}{list(o.shape)}); "
                "aliased buffers must have the same shape and dtype"
            )
