"""``numba_kernel_call_p``: the JAX primitive behind every numba kernel call.

One primitive for all kernels; its parameters name the kernel, the output
avals, the aliases and the batching form. Lowering generates (or loads) the
native handler for the exact dtypes and ranks it sees, so a kernel that is
vmapped with ``expand_dims`` is compiled for the batched ranks rather than fed
buffers it was not compiled for.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax._src import dispatch  # eager calls compile the primitive once, like jax's own
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

from ._codegen import ensure_target
from ._spec import CallSig, KernelInfo, array_sig

__all__ = ["numba_kernel_call_p"]

numba_kernel_call_p = Primitive("numba_kernel_call")
numba_kernel_call_p.multiple_results = True


def _numba_kernel_call_abstract_eval(
    *avals, info, out_avals, aliases, vmap_method, batched, context
):
    del avals, info, aliases, vmap_method, batched, context
    return list(out_avals)


def _numba_kernel_call_lowering(
    ctx, *operands, info: KernelInfo, out_avals, aliases, vmap_method, batched, context
):
    del vmap_method
    sig = CallSig(
        tuple(array_sig(a) for a in ctx.avals_in),
        tuple(array_sig(a) for a in ctx.avals_out),
        batched,
        context,
    )
    name = ensure_target(info, sig)
    lowering = jax.ffi.ffi_lowering(name, operand_output_aliases=dict(aliases) if aliases else None)
    return lowering(ctx, *operands)


def _move_to_front(x: jax.Array, dim: int | None, size: int, materialize: bool) -> jax.Array:
    if dim is None:
        if not materialize:
            return x
        return jnp.broadcast_to(x, (size, *x.shape))
    return jnp.moveaxis(x, dim, 0)


def _batched_avals(out_avals: Sequence[Any], size: int) -> tuple[Any, ...]:
    return tuple(a.update(shape=(size, *a.shape)) for a in out_avals)


def _numba_kernel_call_batching(
    args, dims, *, info, out_avals, aliases, vmap_method, batched, context
):
    size = next(x.shape[d] for x, d in zip(args, dims, strict=True) if d is not None)
    aliased_inputs = {i for i, _ in aliases}
    params = dict(info=info, aliases=aliases, vmap_method=vmap_method, context=context)

    if vmap_method in ("sequential", "sequential_unrolled"):
        moved = [_move_to_front(x, d, size, False) for x, d in zip(args, dims, strict=True)]
        is_batched = [d is not None for d in dims]

        def body(carry, xs):
            it = iter(xs)
            call_args = [next(it) if b else x for x, b in zip(moved, is_batched, strict=True)]
            outs = numba_kernel_call_p.bind(
                *call_args, out_avals=out_avals, batched=batched, **params
            )
            return carry, outs

        xs = [x for x, b in zip(moved, is_batched, strict=True) if b]
        _, outs = lax.scan(body, None, xs, unroll=vmap_method == "sequential_unrolled")
        return list(outs), [0] * len(outs)

    if vmap_method in ("expand_dims", "broadcast_all"):
        # The kernel sees batched shapes: it must handle the extra leading axis.
        new_args = []
        for i, (x, d) in enumerate(zip(args, dims, strict=True)):
            if d is None and (vmap_method == "broadcast_all" or i in aliased_inputs):
                x = jnp.broadcast_to(x, (size, *x.shape))
            elif d is None:
                x = x[None]
            else:
                x = jnp.moveaxis(x, d, 0)
            new_args.append(x)
        outs = numba_kernel_call_p.bind(
            *new_args, out_avals=_batched_avals(out_avals, size), batched=batched, **params
        )
        return list(outs), [0] * len(outs)

    # Default: one native call looping over the batch. Inputs that are batched
    # now, or were batched by an enclosing vmap, get one leading batch axis.
    new_args, flags = [], []
    for i, (x, d) in enumerate(zip(args, dims, strict=True)):
        was = batched is not None and batched[i]
        now = d is not None
        if not now and not was and i not in aliased_inputs:
            new_args.append(x)
            flags.append(False)
            continue
        x = _move_to_front(x, d, size, True)  # (size, [inner,] ...)
        if batched is not None and not was:
            inner = out_avals[0].shape[0]
            x = jnp.broadcast_to(x[:, None], (size, inner, *x.shape[1:]))
        if batched is not None:
            x = x.reshape((-1, *x.shape[2:]))
        new_args.append(x)
        flags.append(True)
    if batched is None:
        new_out = _batched_avals(out_avals, size)
    else:
        inner = out_avals[0].shape[0]
        new_out = tuple(a.update(shape=(size * inner, *a.shape[1:])) for a in out_avals)
    outs = numba_kernel_call_p.bind(*new_args, out_avals=new_out, batched=tuple(flags), **params)
    if batched is not None:
        outs = [o.reshape((size, inner, *o.shape[1:])) for o in outs]
    return list(outs), [0] * len(outs)


numba_kernel_call_p.def_impl(functools.partial(dispatch.apply_primitive, numba_kernel_call_p))
numba_kernel_call_p.def_abstract_eval(_numba_kernel_call_abstract_eval)
mlir.register_lowering(numba_kernel_call_p, _numba_kernel_call_lowering, platform="cpu")
batching.primitive_batchers[numba_kernel_call_p] = _numba_kernel_call_batching
