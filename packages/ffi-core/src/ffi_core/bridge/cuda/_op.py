"""``cuda_launch_p``: one JAX primitive for kernels any bridge launches natively.

A bridge describes a kernel with a :class:`LaunchPlanner`: given the arrays
as the kernel sees them (the batch axis of a batched call excluded) it names
the target, gives the parameter layout and launch, and builds the image for a
compute capability. The primitive does the rest the same way for every
bridge: lowering to an FFI call of the launcher's handler (scalar parameters
travel as the call's attributes, so one compiled handler serves every value),
``vmap`` (one native call launching once per batch element by default, or the
``jax.ffi`` methods), and a clear error where a call is placed on the CPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Protocol

import jax
from jax.interpreters import mlir

from ..._checks import check_static_shapes
from ..._rules import (
    Bind,
    bind_call,
    bridge_primitive,
    planned_bind,
    planned_lowering_args,
    wrong_platform_lowering,
)
from ..._spec import VMAP_METHODS, ArraySig, array_sig, check_vmap_method
from ._handler import LaunchSpec
from ._target import LaunchPlan, cuda_devices, ensure_target

__all__ = [
    "VMAP_METHODS",
    "LaunchPlan",
    "LaunchPlanner",
    "cuda_launch",
    "cuda_launch_bind",
    "cuda_launch_p",
    "lower_launch",
]


class LaunchPlanner(Protocol):
    """What a bridge tells the primitive about one kernel (hashable)."""

    @property
    def label(self) -> str:
        """The kernel's name, as errors and the target name use it. A planner
        may also have ``derivative_fix``, what the refusal to differentiate
        the kernel says to do (its ``KernelInfo``'s; absent or None:
        ``derivative_fix()``, JAX's way alone)."""
        ...

    def plan(
        self,
        inputs: tuple[tuple[ArraySig, tuple[int, ...]], ...],
        outputs: tuple[tuple[ArraySig, tuple[int, ...]], ...],
        batched: bool,
    ) -> LaunchPlan:
        """The target of the kernel for arrays of these signatures and shapes
        (as the kernel sees them); ``batched``: launched once per batch
        element, at offsets inside the buffers."""
        ...


# Abstract evaluation, eager calls, vmap and the refusal to differentiate
# (naming the kernel and the fix) are every bridge primitive's; the lowerings
# are registered at the end of this module.
cuda_launch_p = bridge_primitive(
    "cuda_launch",
    describe=lambda params: params["planner"].label,
    fix=lambda params: getattr(params["planner"], "derivative_fix", None),
)


def _kernel_view(avals: Sequence[Any], lead: Sequence[bool]) -> tuple[Any, ...]:
    return tuple(
        (ArraySig(array_sig(a).dtype, len(a.shape) - int(b)), tuple(a.shape[int(b) :]))
        for a, b in zip(avals, lead, strict=True)
    )


def lower_launch(
    ctx: Any,
    operands: Sequence[Any],
    plan: LaunchPlan,
    *,
    label: str,
    lead: tuple[bool, ...] | None = None,
    aliases: dict[int, int] | None = None,
    attrs: dict[str, Any] | None = None,
    avals_in: Sequence[Any] | None = None,
) -> Any:
    """Lower one launch of ``plan`` as an FFI call of the launcher's handler.

    For bridges with a primitive of their own (Warp's, which carries its
    gradient): ``operands`` (of ``avals_in``, default ``ctx.avals_in``) then
    ``ctx.avals_out`` are the call's buffers; ``lead`` flags those launched
    element by element along their leading axis (None: not batched);
    ``aliases`` maps operands to outputs; ``attrs`` are the scalar
    attributes, values as XLA takes them (see ``attribute_value``).
    """
    avals_in = tuple(ctx.avals_in if avals_in is None else avals_in)
    check_static_shapes(avals_in, ctx.avals_out, label)
    if len(avals_in) != len(ctx.avals_in):
        ctx = ctx.replace(avals_in=avals_in)
    arrays = tuple(array_sig(a) for a in (*avals_in, *ctx.avals_out))
    spec = LaunchSpec(arrays, len(avals_in), plan.layout, plan.launch, lead)
    parts = (*plan.parts, repr(spec))
    name = ensure_target(dataclasses.replace(plan, parts=parts, spec=spec, label=label))
    lowering = jax.ffi.ffi_lowering(name, operand_output_aliases=aliases or None)
    return lowering(ctx, *operands, **(attrs or {}))


def cuda_launch_lowering(ctx, *operands, planner, out_avals, aliases, vmap_method, batched, attrs):
    del out_avals, vmap_method
    check_static_shapes(ctx.avals_in, ctx.avals_out, planner.label)
    n_in = len(ctx.avals_in)
    lead_in = tuple(batched) if batched is not None else (False,) * n_in
    lead_out = (batched is not None,) * len(ctx.avals_out)
    plan = planner.plan(
        _kernel_view(ctx.avals_in, lead_in),
        _kernel_view(ctx.avals_out, lead_out),
        batched is not None,
    )
    return lower_launch(
        ctx,
        operands,
        plan,
        label=planner.label,
        lead=(*lead_in, *lead_out) if batched is not None else None,
        **planned_lowering_args(aliases, attrs),
    )


cuda_launch_cpu_lowering = wrong_platform_lowering("NVIDIA GPUs only", "the CPU", "a GPU", "cuda")


def cuda_launch(
    planner: LaunchPlanner,
    args: Sequence[Any],
    out_avals: tuple[Any, ...],
    *,
    aliases: tuple[tuple[int, int], ...] = (),
    vmap_method: str | None = None,
    attrs: tuple[tuple[str, str, Any], ...] = (),
) -> list[Any]:
    """Launch ``planner``'s kernel on ``args``; its outputs of ``out_avals``.

    ``attrs`` are the scalar parameters as ``(name, dtype, value)``; checked
    arguments are the caller's job (the bridge knows its kernel's rules).
    """
    bind = cuda_launch_bind(planner, aliases=aliases, vmap_method=vmap_method, attrs=attrs)
    return bind_call(bind, args, out_avals)


def cuda_launch_bind(
    planner: LaunchPlanner,
    *,
    aliases: tuple[tuple[int, int], ...] = (),
    vmap_method: str | None = None,
    attrs: tuple[tuple[str, str, Any], ...] = (),
) -> Bind:
    """What a GPU bridge's launch returns for ``kernel_op`` to bind: a launch
    of ``planner``'s kernel through ``cuda_launch_p`` (a RuntimeError where
    JAX has no CUDA device).

    ``attrs`` are the scalar parameters as ``(name, dtype, value)``; checked
    arguments are the caller's job (the bridge knows its kernel's rules).
    """
    check_vmap_method(vmap_method)
    cuda_devices(planner.label)
    return planned_bind(
        cuda_launch_p, planner, aliases=aliases, vmap_method=vmap_method, attrs=attrs
    )


# The lowerings of cuda_launch_p (its other rules: bridge_primitive above).
mlir.register_lowering(cuda_launch_p, cuda_launch_lowering, platform="cuda")
mlir.register_lowering(cuda_launch_p, cuda_launch_cpu_lowering, platform="cpu")
