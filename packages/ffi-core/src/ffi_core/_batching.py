"""Pieces of a bridge's ``jax.vmap`` rule: the batch as one leading axis, or a loop.

A bridge's primitive carries ``batched``: None for a plain call, else which
inputs have a leading batch axis (every output has one), and its handler runs
the kernel once per index of that axis. A second ``vmap`` around the first
does not add a second axis: ``leading_batch`` folds the new batch into the
existing one, so the handler stays the same whatever the nesting.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ._spec import check_vmap_method

__all__ = ["batch_call", "batch_to_front", "expand_batch", "leading_batch", "scan_batch"]


def batch_to_front(x: jax.Array, dim: int | None, size: int) -> jax.Array:
    """``x`` with its batch axis first: moved from ``dim``, or, where ``dim``
    is None (``x`` is not batched), made by broadcasting ``x`` to ``size``.

    Example:
        >>> import jax.numpy as jnp
        >>> batch_to_front(jnp.ones((4, 3)), 1, 3).shape
        (3, 4)
        >>> batch_to_front(jnp.ones(4), None, 3).shape
        (3, 4)
    """
    if dim is None:
        return jnp.broadcast_to(x, (size, *x.shape))
    return jnp.moveaxis(x, dim, 0)


def expand_batch(
    args: Sequence[jax.Array],
    dims: Sequence[int | None],
    size: int,
    aliased_inputs: Collection[int],
    out_avals: Sequence[Any],
    *,
    broadcast_all: bool,
) -> tuple[list[jax.Array], tuple[Any, ...]]:
    """The arguments and output avals of ``vmap_method="expand_dims"`` /
    ``"broadcast_all"``: the kernel sees the batch as a leading axis of every
    array and must handle it itself.

    Batched inputs get their batch axis first. Unbatched ones get a leading
    axis of size 1 (``expand_dims``) or are broadcast to ``size``
    (``broadcast_all``, and always for inputs aliased to an output, whose
    buffer must have the output's shape). Every output gains the axis.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> args, outs = expand_batch(
        ...     [jnp.ones((3, 2)), jnp.ones(3)], [1, None], 2, (),
        ...     [jax.core.ShapedArray((3,), jnp.float32)], broadcast_all=False)
        >>> [a.shape for a in args], [o.shape for o in outs]
        ([(2, 3), (1, 3)], [(2, 3)])
    """
    new_args = []
    for i, (x, d) in enumerate(zip(args, dims, strict=True)):
        if d is None and (broadcast_all or i in aliased_inputs):
            x = jnp.broadcast_to(x, (size, *x.shape))
        elif d is None:
            x = x[None]
        else:
            x = jnp.moveaxis(x, d, 0)
        new_args.append(x)
    return new_args, tuple(a.update(shape=(size, *a.shape)) for a in out_avals)


def scan_batch(
    fn: Callable[..., Sequence[Any]],
    args: Sequence[jax.Array],
    dims: Sequence[int | None],
    *,
    unroll: bool = False,
) -> list[jax.Array]:
    """Call ``fn`` once per batch element in an XLA loop (``lax.scan``).

    Unbatched inputs are passed whole to every call. The outputs are stacked
    along a new leading axis.

    Args:
        fn: takes the inputs of one element and returns a sequence of outputs
            (a rule binds its primitive here).
        args, dims: the batching rule's arguments and their batch axes (None
            where an input is not batched; at least one is not None).
        unroll: unroll the loop fully (``vmap_method="sequential_unrolled"``).

    Returns:
        The outputs, each with the batch along axis 0.

    Example:
        >>> import jax.numpy as jnp
        >>> outs = scan_batch(lambda x, y: [x + y], [jnp.ones((2, 3)), jnp.ones(2)], [1, None])
        >>> outs[0].shape
        (3, 2)
    """
    moved = [x if d is None else jnp.moveaxis(x, d, 0) for x, d in zip(args, dims, strict=True)]
    is_batched = [d is not None for d in dims]

    def body(carry: None, xs: list[jax.Array]) -> tuple[None, Sequence[Any]]:
        it = iter(xs)
        call_args = [next(it) if b else x for x, b in zip(moved, is_batched, strict=True)]
        return carry, fn(*call_args)

    xs = [x for x, b in zip(moved, is_batched, strict=True) if b]
    _, outs = lax.scan(body, None, xs, unroll=unroll)
    return list(outs)


def leading_batch(
    args: Sequence[jax.Array],
    dims: Sequence[int | None],
    size: int,
    batched: Sequence[bool] | None,
    aliased: Collection[int],
    out_avals: Sequence[Any],
) -> tuple[
    list[jax.Array],
    tuple[bool, ...],
    tuple[Any, ...],
    Callable[[Sequence[jax.Array]], list[jax.Array]],
]:
    """Give a call one leading batch axis, folding in the batch of an enclosing ``vmap``.

    An input that is batched now, was batched by an earlier ``vmap``
    (``batched``) or is aliased to an output gets the leading axis (aliased
    ones because their buffer becomes a batched output); the others are
    passed as they are. Where the call was already batched, the new batch of
    ``size`` and the earlier one (the leading axis of the outputs) become one
    axis of their product, and inputs batched only by one of them are
    broadcast along the other.

    Args:
        args, dims, size: the batching rule's inputs, their batch axes (None
            where not batched) and the batch size.
        batched: the primitive's ``batched`` parameter (None for a plain call).
        aliased: the indices of inputs aliased to an output.
        out_avals: the primitive's output avals.

    Returns:
        The new inputs, the new ``batched`` flags and output avals to bind the
        primitive with, and a function taking the primitive's outputs to the
        rule's (each with the batch of ``size`` along axis 0).

    Example:
        >>> import jax.numpy as jnp
        >>> from jax.core import ShapedArray
        >>> out = [ShapedArray((5, 4), jnp.float32)]  # batched before, by 5
        >>> x, y = jnp.ones((3, 5, 4)), jnp.ones(4)  # now x is batched by 3
        >>> new_args, flags, avals, unbatch = leading_batch(
        ...     [x, y], [0, None], 3, (True, False), (), out
        ... )
        >>> [a.shape for a in new_args], flags, avals
        ([(15, 4), (4,)], (True, False), (ShapedArray(float32[15,4]),))
        >>> unbatch([jnp.zeros((15, 4))])[0].shape
        (3, 5, 4)
    """
    new_args, flags = [], []
    inner = None if batched is None else out_avals[0].shape[0]
    for i, (x, d) in enumerate(zip(args, dims, strict=True)):
        was = batched is not None and batched[i]
        if d is None and not was and i not in aliased:
            new_args.append(x)
            flags.append(False)
            continue
        x = batch_to_front(x, d, size)  # (size, [inner,] ...)
        if inner is not None:
            if not was:
                x = jnp.broadcast_to(x[:, None], (size, inner, *x.shape[1:]))
            x = x.reshape((-1, *x.shape[2:]))
        new_args.append(x)
        flags.append(True)
    if inner is None:
        new_avals = tuple(a.update(shape=(size, *a.shape)) for a in out_avals)

        def unbatch(outs: Sequence[jax.Array]) -> list[jax.Array]:
            return list(outs)

    else:
        new_avals = tuple(a.update(shape=(size * inner, *a.shape[1:])) for a in out_avals)

        def unbatch(outs: Sequence[jax.Array]) -> list[jax.Array]:
            return [o.reshape((size, inner, *o.shape[1:])) for o in outs]

    return new_args, tuple(flags), new_avals, unbatch


def batch_call(
    bind: Callable[..., Sequence[jax.Array]],
    args: Sequence[jax.Array],
    dims: Sequence[int | None],
    *,
    out_avals: Sequence[Any],
    batched: Sequence[bool] | None,
    vmap_method: str | None,
    aliased: Collection[int],
) -> tuple[list[jax.Array], list[int]]:
    """The ``jax.vmap`` rule of a bridge primitive, for its ``vmap_method``.

    ``None`` (default): one call whose handler loops over one leading batch
    axis (``leading_batch``); ``"sequential"`` / ``"sequential_unrolled"``: one
    call per batch index in an XLA loop (``scan_batch``); ``"expand_dims"`` /
    ``"broadcast_all"``: one call on the batched arrays (``expand_batch``).

    Args:
        bind: ``bind(*args, out_avals=..., batched=...)`` binds the primitive
            with its other parameters.
        args, dims: the rule's inputs and their batch axes.
        out_avals, batched: the primitive's parameters of those names.
        vmap_method: the call's ``vmap_method``.
        aliased: indices of the inputs aliased to an output.

    Returns:
        The outputs and their batch axes (all 0), as a batching rule returns.

    Raises:
        ValueError: ``vmap_method`` is none of ``VMAP_METHODS`` (a bridge
            handles its own methods before calling this).
    """
    check_vmap_method(vmap_method)
    size = next(x.shape[d] for x, d in zip(args, dims, strict=True) if d is not None)
    if vmap_method in ("sequential", "sequential_unrolled"):
        outs = scan_batch(
            functools.partial(bind, out_avals=out_avals, batched=batched),
            args,
            dims,
            unroll=vmap_method == "sequential_unrolled",
        )
    elif vmap_method in ("expand_dims", "broadcast_all"):
        # The kernel sees batched shapes: it must handle the extra leading axis.
        new_args, new_out = expand_batch(
            args, dims, size, aliased, out_avals, broadcast_all=vmap_method == "broadcast_all"
        )
        outs = list(bind(*new_args, out_avals=new_out, batched=batched))
    else:
        # Inputs batched now, or by an enclosing vmap, get one leading batch axis.
        new_args, flags, new_out, unbatch = leading_batch(
            args, dims, size, batched, aliased, out_avals
        )
        outs = unbatch(bind(*new_args, out_avals=new_out, batched=flags))
    return list(outs), [0] * len(outs)
