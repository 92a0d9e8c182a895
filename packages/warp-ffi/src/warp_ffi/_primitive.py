"""``warp_kernel_call_p``: the JAX primitive behind every Warp kernel call.

One primitive for all kernels, forward and backward (it carries Warp's
gradient, so it stays Warp's own); its parameters name the kernel, the output
avals, the aliases, the scalar values, the launch grid, the batching form and
the direction. On the CPU, lowering plans into ffi-core's CPU call
(``ffi_core.bridge.cpu.lower_cpu_call`` with a ``WarpCpuPlanner``): the handler comes
from ffi-core's one template, for the exact dtypes and ranks it sees.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Any

import numpy as np
from ffi_core.bridge import (
    BOUNDSCHECK_ENV,
    bridge_primitive_abstract_eval,
    bridge_primitive_batching,
    check_static_shapes,
    def_eager_impl,
)
from ffi_core.bridge.cpu import ensure_target, lower_cpu_call
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

from . import _gpu
from ._codegen import load_kernel, plan
from ._inout import output_params
from ._launch import bounds, check_launch, launch_shape
from ._spec import DIMS_ATTR, CallSig, attribute_value, backward_counts
from ._warp import resolve_block_dim

__all__ = ["warp_kernel_call_p"]

warp_kernel_call_p = Primitive("warp_kernel_call")
warp_kernel_call_p.multiple_results = True

#: Warp's array_t holds shapes and byte strides as 32-bit ints.
_INT32_MAX = 2**31 - 1


def _primal_avals(avals_in, avals_out, backward):
    """The primal inputs and outputs among a call's avals (``n_in``, ins, outs)."""
    if not backward:
        return len(avals_in), list(avals_in), list(avals_out)
    n_in, n_out = backward_counts(len(avals_in), len(avals_out))
    return n_in, list(avals_in[:n_in]), list(avals_out[n_in : n_in + n_out])


def _check_int32(info, shapes, dtypes):
    for p, shape, dtype in zip(info.arrays, shapes, dtypes, strict=True):
        nbytes = np.dtype(dtype).itemsize
        for d in shape:
            nbytes *= d
        if nbytes > _INT32_MAX:
            raise ValueError(
                f"parameter '{p.name}' of warp kernel '{info.name}' would get {shape} "
                f"({nbytes} bytes); Warp arrays hold shapes and byte strides as 32-bit ints, "
                "so one array (one batch row) is limited to 2**31 - 1 bytes"
            )


def _call_rows(ctx, info, batched, backward, in_out=()):
    """``(n_in, input rows, output rows, dtypes)`` of a call: its arrays as the
    kernel sees them (``dtypes``: one per array parameter), checked against
    the kernel's annotations; the output rows are the call's outputs' (an
    in-out array's first), without an element's axes."""
    n_in, ins, outs = _primal_avals(ctx.avals_in, ctx.avals_out, backward)

    def row(aval, is_batched):
        return tuple(aval.shape[1:] if is_batched else aval.shape)

    in_rows = [row(a, batched is not None and batched[i]) for i, a in enumerate(ins)]
    out_rows = [row(a, batched is not None) for a in outs]
    # An in-out array is an input and an output: the kernel has one parameter.
    kernel_outs = outs[len(in_out) :]
    dtypes = tuple(np.dtype(a.dtype).name for a in (*ins, *kernel_outs))
    rows = [*in_rows, *out_rows[len(in_out) :]]
    info.check_call(dtypes, rows, n_in)
    _check_int32(info, rows, dtypes)
    # The launch grid follows the Warp arrays' shapes: an element's axes (a
    # vector's, a matrix's) are not part of it.
    out_rows = [
        r[: len(r) - len(p.shape)]
        for r, p in zip(out_rows, output_params(info, n_in, in_out), strict=True)
    ]
    return n_in, in_rows, out_rows, dtypes


def _backward_aliases(info, n_in, aliases, backward):
    """A call's operand-to-output aliases; backward, the cotangents, copied
    into buffers Warp may change."""
    if not backward:
        return dict(aliases)
    n_out = len(info.arrays) - n_in
    return {n_in + k: len(info.arrays) + k for k in range(n_out)}


@dataclasses.dataclass(frozen=True)
class WarpCpuPlanner:
    """A Warp kernel's call on the CPU as ``ffi_core.bridge.cpu`` plans it: the
    forward or the adjoint kernel, the grid read from the first output or
    from an attribute."""

    info: Any
    backward: bool
    grid_from_output: bool
    in_out: tuple[int, ...] = ()
    block_dim: int = 1
    boundscheck: bool = False

    @property
    def label(self) -> str:
        return f"warp kernel '{self.info.name}'"

    def plan(self, inputs, outputs, batched, hint):
        sig = CallSig(
            inputs,
            outputs,
            batched,
            self.backward,
            hint,
            self.grid_from_output,
            self.in_out,
            self.block_dim,
            self.boundscheck,
        )
        loaded = load_kernel(self.info, sig.primal_dtypes(), self.block_dim, self.boundscheck)
        if sig.backward and loaded.backward is None:
            raise NotImplementedError(backward_unavailable(self.info))
        return plan(self.info, sig, loaded)


def _lowering(
    ctx,
    *operands,
    platform,
    info,
    out_avals,
    aliases,
    scalars,
    launch,
    vmap_method,
    batched,
    backward,
    in_out,
    block_dim,
    boundscheck,
):
    """One call on ``platform``: on the CPU, a plan for ffi-core's CPU call;
    on a GPU, Warp's CUDA build launched by ffi-core's launcher.
    ``boundscheck`` is the CPU's (on a GPU, compute-sanitizer checks bounds):
    a GPU call that asks for it runs unchecked, with a warning saying so."""
    del out_avals, vmap_method
    check_static_shapes(ctx.avals_in, ctx.avals_out, info.label)
    n_in, in_rows, out_rows, dtypes = _call_rows(ctx, info, batched, backward, in_out)
    shape = launch_shape(launch, in_rows, out_rows)
    aliases = _backward_aliases(info, n_in, aliases, backward)
    if platform == "cpu":
        block = resolve_block_dim(block_dim, cpu=True, module_default=1)
        loaded = load_kernel(info, dtypes, block, boundscheck)
        check_launch(info, loaded.kernel, shape, block_dim=block)
        grid, mult = bounds(shape, loaded.kernel_dim)
        attrs = {} if launch is None else {DIMS_ATTR: np.array([*grid, mult], np.int64)}
        attrs.update((name, attribute_value(v)) for name, v in scalars)
        planner = WarpCpuPlanner(info, backward, launch is None, in_out, block, boundscheck)
        return lower_cpu_call(ctx, operands, planner, batched=batched, aliases=aliases, attrs=attrs)
    if boundscheck:
        warnings.warn(_gpu_unchecked(info), UserWarning, stacklevel=2)
    kernel = info.specialized(dtypes)
    options = kernel.module.options | kernel.options
    if backward and not options.get("enable_backward", True):
        raise NotImplementedError(backward_unavailable(info))
    block = resolve_block_dim(
        block_dim, cpu=False, module_default=int(options.get("block_dim", 256))
    )
    return _gpu.lower(
        ctx,
        operands,
        info=info,
        dtypes=dtypes,
        shape=shape,
        n_in=n_in,
        batched=batched,
        backward=backward,
        aliases=aliases,
        scalars=scalars,
        in_out=in_out,
        block_dim=block,
    )


_cpu_lowering = functools.partial(_lowering, platform="cpu")
_cuda_lowering = functools.partial(_lowering, platform="cuda")


def make_target(info, sig):
    """Load the kernel for ``sig`` and register its handler: the target name."""
    planner = WarpCpuPlanner(
        info, sig.backward, sig.grid_from_output, sig.in_out, sig.block_dim, sig.boundscheck
    )
    return ensure_target(planner.plan(sig.inputs, sig.outputs, sig.batched, sig.hint))


def _gpu_unchecked(info) -> str:
    return (
        f"warp kernel '{info.name}' runs on a GPU without bounds checks: `boundscheck` (and "
        f"${BOUNDSCHECK_ENV}=1) checks a Warp kernel's indices on the CPU only; check the GPU "
        "kernel with kernel_check.check_kernel(op, ..., sanitize=True) (compute-sanitizer's "
        "memcheck), or put the inputs on the CPU"
    )


def backward_unavailable(info) -> str:
    return (
        f"warp kernel '{info.name}' has no adjoint: its module or kernel was compiled with "
        "enable_backward=False; set it to True (wp.set_module_options or "
        "@wp.kernel(enable_backward=True)) to differentiate through it"
    )


def _rocm_lowering(ctx, *operands, info, **params):
    raise NotImplementedError(
        f"warp kernel '{info.name}' was called on an AMD GPU: Warp builds kernels for NVIDIA "
        "GPUs and CPUs; put the inputs on a CPU or CUDA device"
    )


def _batching(args, dims, *, out_avals, **params):
    # Default: one native call launching the kernel once per batch row, on the
    # row's slices with the unbatched grid.
    also_aliased = frozenset()
    if params["backward"]:  # the cotangents (the last inputs) are aliased to outputs
        n_in, _ = backward_counts(len(args), len(out_avals))
        also_aliased = frozenset(range(n_in, len(args)))
    return bridge_primitive_batching(
        warp_kernel_call_p, args, dims, out_avals=out_avals, also_aliased=also_aliased, **params
    )


def_eager_impl(warp_kernel_call_p)
warp_kernel_call_p.def_abstract_eval(bridge_primitive_abstract_eval)
mlir.register_lowering(warp_kernel_call_p, _cpu_lowering, platform="cpu")
mlir.register_lowering(warp_kernel_call_p, _cuda_lowering, platform="cuda")
mlir.register_lowering(warp_kernel_call_p, _rocm_lowering, platform="rocm")
batching.primitive_batchers[warp_kernel_call_p] = _batching
