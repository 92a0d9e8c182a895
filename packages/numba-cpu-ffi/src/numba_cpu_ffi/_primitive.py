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
    batch_call,
    def_eager_impl,
    hint_source,
    lower_with_hint,
    raise_on_differentiation,
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
    bind = functools.partial(
        numba_kernel_call_p.bind,
        info=info,
        aliases=aliases,
        vmap_method=vmap_method,
        context=context,
    )
    return batch_call(
        bind,
        args,
        dims,
        out_avals=out_avals,
        batched=batched,
        vmap_method=vmap_method,
        aliased={i for i, _ in aliases},
    )


def_eager_impl(numba_kernel_call_p)
numba_kernel_call_p.def_abstract_eval(_numba_kernel_call_abstract_eval)
mlir.register_lowering(numba_kernel_call_p, _numba_kernel_call_lowering, platform="cpu")
batching.primitive_batchers[numba_kernel_call_p] = _numba_kernel_call_batching
raise_on_differentiation(
    numba_kernel_call_p, describe=lambda params: f"numba kernel '{params['info'].name}'"
)
