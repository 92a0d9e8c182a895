"""``numba_cuda_call_p``: the JAX primitive behind every numba CUDA kernel call.

One primitive for all kernels; its parameters name the kernel, the output
avals, the aliases, the launch and the batching form. Lowering compiles and
loads the kernel for the dtypes and ranks it sees and emits an FFI call to its
native handler.
"""

from __future__ import annotations

import jax
from ffi_core.bridge import array_sig, batch_to_front, bridge_primitive, bridge_primitive_batching
from jax.interpreters import mlir

from ._spec import CallSig, KernelInfo
from ._target import kernel_target

__all__ = ["numba_cuda_call_p"]


def _numba_cuda_call_batching(args, dims, **params):
    if params["vmap_method"] == "fold":
        outs = _fold(args, dims, **params)
        return outs, [0] * len(outs)
    # expand_dims / broadcast_all: the kernel handles the extra leading axis
    # itself and the launch stays as given; default: one native call launching
    # once per batch element.
    return bridge_primitive_batching(numba_cuda_call_p, args, dims, **params)


# Abstract evaluation, eager calls and the refusal to differentiate (naming
# the kernel and the fix) are every bridge primitive's; vmap is too, but for
# "fold". The lowerings are registered at the end of this module.
numba_cuda_call_p = bridge_primitive(
    "numba_cuda_call",
    describe=lambda params: params["info"].label,
    fix=lambda params: params["info"].derivative_fix,
    batching_rule=_numba_cuda_call_batching,
)


def _numba_cuda_call_lowering(
    ctx, *operands, info: KernelInfo, out_avals, aliases, vmap_method, batched, launch
):
    del out_avals, vmap_method
    sig = CallSig(
        tuple(array_sig(a) for a in ctx.avals_in),
        tuple(array_sig(a) for a in ctx.avals_out),
        batched,
    )
    name = kernel_target(info, sig, launch)
    lowering = jax.ffi.ffi_lowering(name, operand_output_aliases=dict(aliases) if aliases else None)
    return lowering(ctx, *operands)


def _numba_cuda_call_cpu_lowering(ctx, *operands, info: KernelInfo, **params):
    del ctx, operands, params
    raise RuntimeError(
        f"{info.label} runs on NVIDIA GPUs only, but this computation is placed on the CPU; "
        "put its inputs on a GPU (jax.device_put(x, jax.devices('cuda')[0]))"
    )


def _fold(args, dims, *, info, out_avals, aliases, vmap_method, batched, launch):
    # The caller declared the kernel row-independent along axis 0: fold the
    # batch into axis 0 of every array and scale launch axis x with it.
    size = next(x.shape[d] for x, d in zip(args, dims, strict=True) if d is not None)
    for what, shapes in (
        ("input", [x.shape for x in args]),
        ("output", [a.shape for a in out_avals]),
    ):
        for k, shape in enumerate(shapes):
            if not shape:
                raise NotImplementedError(
                    f"vmap_method='fold' folds the batch into axis 0, but {what} {k} of "
                    f"{info.label} is 0-d; use vmap_method=None (one launch per batch element)"
                )
    moved = [batch_to_front(x, d, size) for x, d in zip(args, dims, strict=True)]
    folded = [m.reshape((-1, *m.shape[2:])) for m in moved]
    new_out = tuple(a.update(shape=(size * a.shape[0], *a.shape[1:])) for a in out_avals)
    outs = numba_cuda_call_p.bind(
        *folded,
        info=info,
        out_avals=new_out,
        aliases=aliases,
        vmap_method=vmap_method,
        batched=batched,
        launch=launch.folded(size),
    )
    return [o.reshape((size, *a.shape)) for o, a in zip(outs, out_avals, strict=True)]


# The lowerings of numba_cuda_call_p (its other rules: bridge_primitive above).
mlir.register_lowering(numba_cuda_call_p, _numba_cuda_call_lowering, platform="cuda")
mlir.register_lowering(numba_cuda_call_p, _numba_cuda_call_cpu_lowering, platform="cpu")
