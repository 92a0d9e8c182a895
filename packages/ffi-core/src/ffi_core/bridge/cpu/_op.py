"""``cpu_call_p``: one JAX primitive for kernels any bridge runs natively on the CPU.

The CPU twin of ``ffi_core.bridge.cuda.cuda_launch_p``. A bridge describes a kernel
with a :class:`CpuPlanner`: given the call frame's buffers it names the
target and says how to build its handler (from the one template,
``ffi_core.bridge.cpu.cpu_handler_source``) and how an exported call makes it again.
The primitive does the rest the same way for every bridge: abstract
evaluation, lowering to an FFI call of the handler (with the cost hint of
large calls, and scalar parameters as the call's attributes), ``vmap`` (one
native call looping over the batch by default, or the ``jax.ffi``
methods), and JVP and transpose rules that name the kernel and the fix.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import jax
import numpy as np
from jax.interpreters import mlir

from ..._checks import check_static_shapes
from ..._cost_hint import hint_source, lower_with_hint
from ..._registry import register_target, target_name
from ..._rules import (
    Bind,
    bind_call,
    bridge_primitive,
    planned_bind,
    planned_lowering_args,
    wrong_platform_lowering,
)
from ..._spec import ArraySig, array_sig, check_vmap_method
from ...export import Unexportable, record_recipe

__all__ = [
    "CpuPlan",
    "CpuPlanner",
    "cpu_call",
    "cpu_call_bind",
    "cpu_call_p",
    "ensure_target",
    "lower_cpu_call",
]


@dataclasses.dataclass(frozen=True)
class CpuPlan:
    """One kernel's target for one signature.

    Attributes:
        prefix: the start of the target's name (``"numba_cpu.add"``).
        parts: the rest of the name: they identify the kernel's code and all
            else the handler depends on, so a changed kernel gets another target.
        content: what the registry compares when a name is registered again
            (the same name with other content is refused).
        build: compiles the handler without a planner (a closure); None
            (the default): ``planner.build(sig)`` does.
        recipe: how ``ffi_core.deserialize`` makes the target again (a JSON
            step its bridge registered a rebuilder for), an ``Unexportable``
            saying why it cannot, or None (not recorded).
        prepare: called at every lowering with the built handler, the
            call's work (the elements of its largest buffer) and the rows of
            a batched call (None where either is not known, as for a target
            made again from a recipe), before XLA can call the handler: what
            only some calls need (a parallel form of the kernel, a form
            that runs a batch's rows itself) is compiled here. None (the
            default): ``planner.prepare(sig, handler, work, rows)`` where
            the planner has that method.
        planner: the planner that made the plan; its ``build(sig)``
            compiles the handler (a Numba ``cfunc``), once per process and
            target.
        sig: what the planner's ``build`` and ``prepare`` take: the
            bridge's own signature of the call.
        work: the call's work, the elements of its largest buffer (set at
            lowering; None where it is not known).
        rows: the rows of a batched call, the leading axis of its first
            output (set at lowering; None for an unbatched call or where it
            is not known).
    """

    prefix: str
    parts: tuple[str, ...]
    content: str
    build: Callable[[], Any] | None = dataclasses.field(default=None, compare=False)
    recipe: dict[str, Any] | Unexportable | None = dataclasses.field(default=None, compare=False)
    prepare: Callable[[Any, int | None, int | None], None] | None = dataclasses.field(
        default=None, compare=False
    )
    planner: Any = dataclasses.field(default=None, compare=False)
    sig: Any = dataclasses.field(default=None, compare=False)
    work: int | None = dataclasses.field(default=None, compare=False)
    rows: int | None = dataclasses.field(default=None, compare=False)


class CpuPlanner(Protocol):
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
        inputs: tuple[ArraySig, ...],
        outputs: tuple[ArraySig, ...],
        batched: tuple[bool, ...] | None,
        hint: bool,
    ) -> CpuPlan:
        """The target of the kernel for a call frame of these buffers
        (ranks include the batch axis of a batched call); ``hint``: the call
        carries one more input, the cost hint, that the handler ignores."""
        ...

    def build(self, sig: Any) -> Any:
        """The handler (a Numba ``cfunc``) of the plan's ``sig``; called once
        per process and target. Optional where the plan carries a ``build``
        closure. A planner may also have ``prepare(sig, handler, work, rows)``
        (see ``CpuPlan.prepare``)."""
        ...


_lock = threading.Lock()
_handlers: dict[tuple[str, tuple[str, ...]], tuple[str, Any]] = {}


def ensure_target(plan: CpuPlan) -> str:
    """Build (once per process) and register ``plan``'s handler, prepare it
    for a call of ``plan.work`` elements in ``plan.rows`` rows and record
    its recipe; returns the target name."""
    key = (plan.prefix, plan.parts)
    with _lock:
        entry = _handlers.get(key)
        if entry is None:
            build = plan.build
            handler = build() if build is not None else plan.planner.build(plan.sig)
            entry = (target_name(plan.prefix, *plan.parts), handler)
            _handlers[key] = entry
    name, handler = entry
    if plan.prepare is not None:
        plan.prepare(handler, plan.work, plan.rows)
    else:
        prepare = getattr(plan.planner, "prepare", None)
        if prepare is not None:
            prepare(plan.sig, handler, plan.work, plan.rows)
    register_target(name, handler, content=plan.content, platform="cpu")
    if plan.recipe is not None:
        record_recipe(name, plan.recipe)
    return name


def lower_cpu_call(
    ctx: Any,
    operands: Sequence[Any],
    planner: CpuPlanner,
    *,
    batched: tuple[bool, ...] | None = None,
    aliases: dict[int, int] | None = None,
    attrs: dict[str, Any] | None = None,
) -> Any:
    """Lower one call of ``planner``'s kernel as an FFI call of its handler.

    For bridges with a primitive of their own (Warp's, which carries its
    gradient): ``operands`` of ``ctx.avals_in``, ``batched`` as in
    ``ffi_core.bridge.CallSig``, ``aliases`` maps operands to outputs, ``attrs``
    are the call's attributes, values as XLA takes them. A large call gets
    the cost hint (one more input) where ``ffi_core.bridge.hint_source`` finds one.
    """
    check_static_shapes(ctx.avals_in, ctx.avals_out, planner.label)
    source = hint_source(ctx.avals_in, ctx.avals_out)
    plan = planner.plan(
        tuple(array_sig(a) for a in ctx.avals_in),
        tuple(array_sig(a) for a in ctx.avals_out),
        batched,
        source is not None,
    )
    work = max((int(np.prod(a.shape)) for a in (*ctx.avals_in, *ctx.avals_out)), default=0)
    first = ctx.avals_out[0] if ctx.avals_out else None
    rows = first.shape[0] if batched is not None and first is not None and first.ndim else None
    name = ensure_target(dataclasses.replace(plan, work=work, rows=rows))
    lowering = jax.ffi.ffi_lowering(name, operand_output_aliases=aliases or None)
    if source is None:
        return lowering(ctx, *operands, **(attrs or {}))
    return lower_with_hint(lowering, ctx, operands, source, **(attrs or {}))


cpu_call_p = bridge_primitive(
    "cpu_call",
    describe=lambda params: params["planner"].label,
    fix=lambda params: getattr(params["planner"], "derivative_fix", None),
)


def _cpu_call_lowering(ctx, *operands, planner, out_avals, aliases, vmap_method, batched, attrs):
    del out_avals, vmap_method
    return lower_cpu_call(
        ctx, operands, planner, batched=batched, **planned_lowering_args(aliases, attrs)
    )


_accelerator_lowering = wrong_platform_lowering("the CPU only", "an accelerator", "the CPU", "cpu")


def cpu_call_bind(
    planner: CpuPlanner,
    *,
    aliases: tuple[tuple[int, int], ...] = (),
    vmap_method: str | None = None,
    attrs: tuple[tuple[str, str, Any], ...] = (),
) -> Bind:
    """What a CPU bridge's launch returns for ``kernel_op`` to bind: a call of
    ``planner``'s kernel through ``cpu_call_p``.

    ``attrs`` are scalar parameters as ``(name, dtype, value)``; checked
    arguments are the caller's job (the bridge knows its kernel's rules).
    """
    check_vmap_method(vmap_method)
    return planned_bind(cpu_call_p, planner, aliases=aliases, vmap_method=vmap_method, attrs=attrs)


def cpu_call(
    planner: CpuPlanner,
    args: Sequence[Any],
    out_avals: tuple[Any, ...],
    *,
    aliases: tuple[tuple[int, int], ...] = (),
    vmap_method: str | None = None,
    attrs: tuple[tuple[str, str, Any], ...] = (),
) -> list[Any]:
    """Run ``planner``'s kernel on ``args``; its outputs of ``out_avals``.

    ``attrs`` are scalar parameters as ``(name, dtype, value)``; checked
    arguments are the caller's job (the bridge knows its kernel's rules).
    """
    bind = cpu_call_bind(planner, aliases=aliases, vmap_method=vmap_method, attrs=attrs)
    return bind_call(bind, args, out_avals)


# The lowerings of cpu_call_p (its other rules: bridge_primitive above).
mlir.register_lowering(cpu_call_p, _cpu_call_lowering, platform="cpu")
mlir.register_lowering(cpu_call_p, _accelerator_lowering, platform="cuda")
mlir.register_lowering(cpu_call_p, _accelerator_lowering, platform="rocm")
