"""A bridge's ``outs``: the output specs a caller gives, as avals.

An output is described by anything with ``shape`` and ``dtype``, as
``jax.ffi.ffi_call`` takes it; several by a sequence or a pytree of them,
which the call's results are rebuilt into.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax import core as jax_core

from ._spec import KernelDTypes, check_dtype

__all__ = ["is_output_spec", "normalize_outs", "output_avals"]

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
        struct = spec
    else:
        try:
            struct = jax.ShapeDtypeStruct(tuple(spec.shape), spec.dtype)
        except (TypeError, ValueError) as exc:
            raise TypeError(
                f"{where} must be {_OUTPUT_SPEC}, got {type(spec)!r} whose shape "
                f"{spec.shape!r} and dtype {spec.dtype!r} do not describe an array: {exc}"
            ) from None
    if any(isinstance(d, int) and d < 0 for d in struct.shape):
        raise ValueError(
            f"{where} has the shape {tuple(struct.shape)}; an array's sizes are 0 or more"
        )
    return struct


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
        ValueError: a leaf's shape has a negative size.

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
        tree_leaves, treedef = jax.tree.flatten(outs, is_leaf=is_output_spec)
        for leaf in tree_leaves:
            if not is_output_spec(leaf):
                raise TypeError(
                    f"`outs` must be {_OUTPUT_SPEC} or a sequence or pytree of them, "
                    f"got a leaf of {type(leaf)!r}"
                )
        structs = tuple(_as_struct(leaf, "a leaf of `outs`") for leaf in tree_leaves)
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
