"""``numba_kernel_call_p``: the JAX primitive behind every numba kernel call.

One primitive for all kernels; its parameters name the kernel, the output
avals, the aliases and the batching form. Lowering generates (or loads) the
native handler for the exact dtypes and ranks it sees, so a kernel that is
vmapped with ``expand_dims`` is compiled for the batched ranks rather than fed
buffers it was not compiled for.
"""

from __future__ import annotations

import functools

import jax
from ffi_core import (
    array_sig,
    def_eager_impl,
    expand_batch,
    hint_source,
    leading_batch,
    lower_with_hint,
    scan_batch,
)
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

from ._codegen import ensure_target
from ._spec import CallSig, KernelInfo

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
    source = hint_source(ctx.avals_in, ctx.avals_out)
    sig = CallSig(
        tuple(array_sig(a) for a in ctx.avals_in),
        tuple(array_sig(a) for a in ctx.avals_out),
        batched,
        context,
        source is not None,
    )
    name = ensure_target(info, sig)
    lowering = jax.ffi.ffi_lowering(name, operand_output_aliases=dict(aliases) if aliases else None)
    if source is None:
        return lowering(ctx, *operands)
    return lower_with_hint(lowering, ctx, operands, source)


def _numba_kernel_call_batching(
    args, dims, *, info, out_avals, aliases, vmap_method, batched, context
):
    size = next(x.shape[d] for x, d in zip(args, dims, strict=True) if d is not None)
    aliased_inputs = {i for i, _ in aliases}
    params = dict(info=info, aliases=aliases, vmap_method=vmap_method, context=context)

    if vmap_method in ("sequential", "sequential_unrolled"):
        outs = scan_batch(
            functools.partial(
                numba_kernel_call_p.bind, out_avals=out_avals, batched=batched, **params
            ),
            args,
            dims,
            unroll=vmap_method == "sequential_unrolled",
        )
        return outs, [0] * len(outs)

    if vmap_method in ("expand_dims", "broadcast_all"):
        # The kernel sees batched shapes: it must handle the extra leading axis.
        new_args, new_out = expand_batch(
            args,
            dims,
            size,
            aliased_inputs,
            out_avals,
            broadcast_all=vmap_method == "broadcast_all",
        )
        outs = numba_kernel_call_p.bind(*new_args, out_avals=new_out, batched=batched, **params)
        return list(outs), [0] * len(outs)

    # Default: one native call looping over the batch. Inputs that are batched
    # now, or were batched by an enclosing vmap, get one leading batch axis.
    new_args, flags, new_out, unbatch = leading_batch(
        args, dims, size, batched, aliased_inputs, out_avals
    )
    outs = unbatch(numba_kernel_call_p.bind(*new_args, out_avals=new_out, batched=flags, **params))
    return outs, [0] * len(outs)


def_eager_impl(numba_kernel_call_p)
numba_kernel_call_p.def_abstract_eval(_numba_kernel_call_abstract_eval)
mlir.register_lowering(numba_kernel_call_p, _numba_kernel_call_lowering, platform="cpu")
batching.primitive_batchers[numba_kernel_call_p] = _numba_kernel_call_batching
