"""Batching levels and the adapters that run user JVP/transpose rules on
batched calls.

The default batching rule does not expand a call into a loop at trace time:
it binds the same primitive again with one more *batch level* ``(size,
mask)`` (``mask[i]``: input ``i`` carries this level's axis in front), outermost
level first. Lowering then picks the backend and applies the levels to its
callable, with ``jax.vmap`` (one call for the batch where the callable's own
operations batch natively, like a numba kernel or jnp code) or ``lax.map``
(one call per element inside a single XLA loop). JVP and transpose rules are
written for unbatched calls; for a batched call they are vmapped level by
level, so ``grad(vmap(f))`` works as well as ``vmap(grad(f))``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["Level", "apply_levels", "move_batch_axes", "vmap_levels"]

Level = tuple[int, tuple[bool, ...]]


def move_batch_axes(
    args: Sequence[Any], dims: Sequence[int | None]
) -> tuple[int, list[Any], tuple[bool, ...]]:
    """``(size, args with the batch axis in front, mask of batched inputs)``."""
    size = next(x.shape[d] for x, d in zip(args, dims, strict=True) if d is not None)
    moved = [x if d is None else jnp.moveaxis(x, d, 0) for x, d in zip(args, dims, strict=True)]
    return size, moved, tuple(d is not None for d in dims)


def _loop_level(f: Callable[..., list[Any]], mask: tuple[bool, ...]) -> Callable[..., list[Any]]:
    def looped(*args: Any) -> list[Any]:
        def body(xs: Sequence[Any]) -> list[Any]:
            it = iter(xs)
            return f(*[next(it) if m else a for a, m in zip(args, mask, strict=True)])

        return list(lax.map(body, [a for a, m in zip(args, mask, strict=True) if m]))

    return looped


def apply_levels(
    f: Callable[..., list[Any]], batch: Sequence[Level], mode: str
) -> Callable[..., list[Any]]:
    """``f`` (unbatched inputs -> list of outputs) lifted to the batched call.

    ``mode`` is ``"vmap"`` or ``"loop"``.
    """
    for _, mask in reversed(batch):
        if mode == "vmap":
            f = jax.vmap(f, in_axes=tuple(0 if m else None for m in mask))
        else:
            f = _loop_level(f, mask)
    return f


def vmap_levels(
    f: Callable[..., list[Any]],
    batch: Sequence[Level],
    masks: Sequence[tuple[bool, ...]],
    out_mapped: Sequence[tuple[bool, ...]] | None = None,
) -> Callable[..., list[Any]]:
    """``f`` vmapped over every level, with ``masks[k]`` the in-mask of level ``k``
    for ``f``'s own arguments.

    ``out_mapped[k][j]`` False: output ``j`` is summed over level ``k``'s axis
    (the cotangent of an input that the level broadcast).
    """
    for level in reversed(range(len(batch))):
        f = _vmap_one(f, masks[level], None if out_mapped is None else out_mapped[level])
    return f


def _vmap_one(
    f: Callable[..., list[Any]], mask: tuple[bool, ...], out_mapped: tuple[bool, ...] | None
) -> Callable[..., list[Any]]:
    vf = jax.vmap(f, in_axes=tuple(0 if m else None for m in mask))
    if out_mapped is None:
        return vf

    def level(*args: Any) -> list[Any]:
        outs = list(vf(*args))
        return [o if m else o.sum(axis=0) for o, m in zip(outs, out_mapped, strict=True)]

    return level
