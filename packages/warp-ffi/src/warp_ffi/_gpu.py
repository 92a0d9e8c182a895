"""Warp kernels on NVIDIA GPUs, launched by ffi-core's native CUDA launcher.

Warp compiles a kernel's module for a GPU architecture without needing that
GPU (its ahead-of-time build, NVRTC inside Warp), into Warp's kernel cache
on disk, so a later process reads the binary instead of compiling again. Each
kernel becomes the entries ``<mangled>_cuda_kernel_forward(bounds, params...)``
and ``..._backward(bounds, params..., adjoints...)``: a ``wp::launch_bounds_t``,
then per parameter a ``wp::array_t`` (data, grad, shape, byte strides, ndim,
flags) or the scalar, all passed by value. :func:`lower` describes exactly
that as a :class:`ffi_core.bridge.cuda.ParamLayout` and lowers the call to the
launcher's handler: cubin loaded once per device, the structs packed from
the call frame per launch, ``cuLaunchKernel`` on XLA's stream with Warp's
grid-stride launch (``block_dim`` threads per block, enough blocks to cover
the grid once), command-buffer compatible. No Python per call.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import math
import threading
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from ffi_core.bridge.cuda import (
    MAX_GRID,
    LaunchPlan,
    LayoutBuilder,
    ParamLayout,
    launch_config,
    local_capabilities,
    lower_launch,
)
from jax.interpreters import mlir

from ._codegen import KernelCompileError
from ._inout import buffer_of_array
from ._launch import bounds, check_launch
from ._spec import KernelInfo, attribute_dtype, attribute_value
from ._warp import compile_for_arch, wp_types

__all__ = ["ENTRIES", "WarpImage", "compile_gpu", "gpu_layout", "lower"]

# Its fields' offsets are read from the class (ctypes descriptors), which Warp's types
# annotate as instance fields only.
_ARRAY_T: Any = wp_types.array_t
_INT = 4


@dataclasses.dataclass(frozen=True)
class WarpImage:
    """A kernel specialization compiled for one GPU architecture: the
    module's cubin (or NUL-terminated PTX), the kernel's entry names, each
    entry's dynamic shared memory (Warp's tile kernels), and Warp's hash of
    the kernel's code."""

    data: bytes
    forward: str
    backward: str
    shared_mem: dict[str, int]
    code_hash: str
    ptx: bool


_lock = threading.Lock()
_images: dict[tuple[Any, int, bool | None, int], WarpImage] = {}
#: Every entry compiled here: entry name -> (kernel info, array dtypes,
#: backward). The emulated GPU of ``warp_ffi.testing`` runs Warp's CPU build
#: of the same kernel for each.
ENTRIES: dict[str, tuple[KernelInfo, tuple[str, ...], bool]] = {}


def compile_gpu(
    info: KernelInfo,
    dtypes: tuple[str, ...],
    capability: tuple[int, int],
    *,
    block_dim: int = 256,
    use_ptx: bool | None = None,
) -> WarpImage:
    """Compile (or read from Warp's cache) the kernel for arrays of
    ``dtypes`` for a GPU of compute ``capability``; once per process.
    ``block_dim``: the threads per block it is built for (Warp's tile
    kernels depend on it). ``use_ptx``: Warp's choice by default (a cubin
    where its NVRTC knows the architecture)."""
    kernel = info.specialized(dtypes)
    arch = capability[0] * 10 + capability[1]
    key = (kernel, arch, use_ptx, block_dim)
    with _lock:
        found = _images.get(key)
        if found is not None:
            return found
        try:
            path = compile_for_arch(kernel.module, arch, use_ptx, block_dim)
            data = path.read_bytes()
            stem = path.name[: path.name.index(f".sm{arch}")]
            meta = json.loads((path.parent / f"{stem}.meta").read_text())
        except Exception as exc:
            raise KernelCompileError(
                f"warp kernel '{info.name}' does not compile for a GPU of compute capability "
                f"{capability[0]}.{capability[1]} with arrays of ({', '.join(dtypes)}): "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        ptx = path.suffix == ".ptx"
        mangled = kernel.get_mangled_name()
        entries = (f"{mangled}_cuda_kernel_forward", f"{mangled}_cuda_kernel_backward")
        image = WarpImage(
            data + b"\0" if ptx else data,
            *entries,
            {e: int(meta.get(f"{e}_smem_bytes", 0)) for e in entries},
            kernel.hash.hex()[:16],
            ptx,
        )
        _images[key] = image
        for backward, entry in enumerate(entries):
            ENTRIES[entry] = (info, tuple(dtypes), bool(backward))
    return image


def _array_param(b: LayoutBuilder, buffer: int, ndim: int, itemsize: int) -> None:
    """A ``wp::array_t`` of buffer ``buffer`` (C-contiguous, byte strides)."""
    at = b.param(ctypes.sizeof(_ARRAY_T), ctypes.alignment(_ARRAY_T))
    b.field(at + _ARRAY_T.data.offset, "uint64", "data", buffer=buffer)
    b.field(at + _ARRAY_T.grad.offset, "uint64", "const", value=0)
    for d in range(wp_types.ARRAY_MAX_DIMS):
        shape, stride = (
            at + _ARRAY_T.shape.offset + _INT * d,
            at + _ARRAY_T.strides.offset + _INT * d,
        )
        if d < ndim:
            b.field(shape, "int32", "dim", buffer=buffer, axis=d)
            b.field(stride, "int32", "stride", buffer=buffer, axis=d, value=itemsize)
        else:
            b.field(shape, "int32", "const", value=0)
            b.field(stride, "int32", "const", value=0)
    b.field(at + _ARRAY_T.ndim.offset, "uint16", "const", value=ndim)
    b.field(at + _ARRAY_T.flags.offset, "uint16", "const", value=0)


def gpu_layout(
    info: KernelInfo,
    dtypes: Sequence[str],
    grid: tuple[int, ...],
    mult: int,
    primal: Sequence[int],
    adjoint: Sequence[int] | None = None,
) -> ParamLayout:
    """The parameters of the kernel's forward entry (``adjoint`` None) or
    backward entry: the launch bounds of ``grid`` (threads sharing a
    coordinate: ``mult``), then each parameter, array ``k`` from buffer
    ``primal[k]``; then, backward, each parameter's adjoint, array ``k``'s
    from buffer ``adjoint[k]`` (a scalar's adjoint is a zero Warp does not
    return)."""
    bounds = wp_types._launch_bounds_classes[len(grid)]
    b = LayoutBuilder()
    at = b.param(ctypes.sizeof(bounds), ctypes.alignment(bounds))
    for k, n in enumerate(grid):
        b.field(at + bounds.shape.offset + _INT * k, "uint32", "const", value=n)
    b.field(at + bounds.size.offset, "uint64", "const", value=math.prod(grid) * mult)
    b.field(at + bounds.coord_mult.offset, "uint64", "const", value=mult)
    for buffers in (primal, adjoint):
        if buffers is None:
            continue
        arrays = iter(range(len(info.arrays)))
        for p in info.params:
            if p.ndim is not None:
                k = next(arrays)
                _array_param(b, buffers[k], p.ndim, np.dtype(dtypes[k]).itemsize)
            elif buffers is primal:
                # A scalar Param always has a dtype; a 16-bit float is its bits.
                b.scalar(p.name, attribute_dtype(cast(str, p.dtype)))
            else:
                b.constant(0, attribute_dtype(cast(str, p.dtype)))
    return b.build()


def _zeros(aval: Any) -> Any:
    """An MLIR value of zeros of ``aval`` (a broadcast scalar)."""
    return mlir.ir_constant(np.broadcast_to(np.zeros((), aval.dtype), aval.shape))


def lower(
    ctx: Any,
    operands: Sequence[Any],
    *,
    info: KernelInfo,
    dtypes: tuple[str, ...],
    shape: tuple[int, ...],
    n_in: int,
    batched: tuple[bool, ...] | None,
    backward: bool,
    aliases: dict[int, int],
    scalars: tuple[tuple[str, Any], ...],
    in_out: tuple[int, ...] = (),
    block_dim: int = 256,
) -> Any:
    """Lower one call of the kernel (``n_in`` primal inputs) over the launch
    grid ``shape`` to a launch of ``block_dim`` threads per block.

    Forward, the call's buffers are the inputs then the outputs. Backward
    (see ``backward_counts``) they are the primal inputs, the outputs'
    cotangents, then here zeros for the inputs' gradients (Warp's adjoint
    adds into them), aliased to the gradient outputs; the outputs are the
    gradients, the outputs replayed, and the cotangents again. An in-out
    parameter (``in_out``, forward only) is launched on its output buffer.
    """
    kernel = info.specialized(dtypes)
    label = f"warp kernel '{info.name}'" + (" (backward)" if backward else "")
    capability = local_capabilities(label)[0]
    image = compile_gpu(info, dtypes, capability, block_dim=block_dim)
    entry = image.backward if backward else image.forward
    # Known once Warp built the kernel.
    check_launch(info, kernel, shape, block_dim=block_dim)
    grid, mult = bounds(shape, kernel.adj.kernel_dim)
    n_arr = len(info.arrays)
    n_out = n_arr - n_in
    avals_in = list(ctx.avals_in)
    operands = list(operands)
    aliases = dict(aliases)
    lead_in = list(batched) if batched is not None else [False] * len(avals_in)
    if backward:
        grads = list(ctx.avals_out[:n_in])
        for j, aval in enumerate(grads):
            aliases[len(avals_in)] = j
            operands.append(_zeros(aval))
            avals_in.append(aval)
            lead_in.append(batched is not None)
        first_out = len(avals_in)
        primal = [*range(n_in), *(first_out + n_in + j for j in range(n_out))]
        adjoint = [
            *(first_out + k for k in range(n_in)),
            *(first_out + n_arr + j for j in range(n_out)),
        ]
    else:
        primal, adjoint = [buffer_of_array(k, n_in, in_out) for k in range(n_arr)], None
    layout = gpu_layout(info, dtypes, grid, mult, primal, adjoint)
    blocks = min(max(1, -(-(math.prod(grid) * mult) // block_dim)), MAX_GRID[0])
    launch = launch_config(grid=blocks, block=block_dim, shared_mem=image.shared_mem[entry])

    def build(cc: tuple[int, int]) -> tuple[bytes, str]:
        return compile_gpu(info, dtypes, cc, block_dim=block_dim).data, entry

    # Blocks and bounds are constants of the handler: the grid is named by the spec.
    plan = LaunchPlan(
        f"warp_cuda.{info.name}", (info.digest, image.code_hash), layout, launch, build
    )
    lead = (*lead_in, *(batched is not None,) * len(ctx.avals_out)) if batched is not None else None
    return lower_launch(
        ctx,
        operands,
        plan,
        label=label,
        lead=lead,
        aliases=aliases,
        attrs={name: attribute_value(value) for name, value in scalars},
        avals_in=avals_in,
    )
