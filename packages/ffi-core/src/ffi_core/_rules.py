"""The rules every bridge primitive shares, written once.

A bridge primitive (``cuda_launch_p``, numba-cuda-ffi's, the CPU call's)
binds the kernel's inputs with four parameters of the same meaning:
``out_avals`` (the outputs), ``aliases`` (``(input, output)`` pairs),
``vmap_method`` and ``batched`` (None, or which inputs carry a leading batch
axis); the rest are the bridge's. Its abstract evaluation, its eager
implementation, its ``vmap`` rule and its refusal to be differentiated are
the same for every such primitive: ``bridge_primitive`` makes one with them.
Its lowerings are the bridge's.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jax.extend.core import Primitive
from jax.interpreters import batching

from ._autodiff import raise_on_differentiation
from ._batching import batch_call
from ._errors import WrongPlatformError
from ._jax_compat import def_eager_impl, with_varying_axes
from ._spec import attribute_value

__all__ = [
    "Bind",
    "bind_call",
    "bridge_primitive",
    "bridge_primitive_abstract_eval",
    "bridge_primitive_batching",
    "planned_bind",
    "planned_lowering_args",
    "wrong_platform_lowering",
]


def bridge_primitive_abstract_eval(*avals: Any, out_avals: Any, **params: Any) -> list[Any]:
    """The outputs of a bridge primitive: its ``out_avals``, varying along the
    manual mesh axes of ``shard_map`` along which any input varies (so a
    ``lax.scan`` carry through the call keeps its type under
    ``check_vma=True``)."""
    del params
    return with_varying_axes(out_avals, avals)


def bridge_primitive_batching(
    primitive: Primitive,
    args: Any,
    dims: Any,
    *,
    out_avals: Any,
    aliases: Any,
    vmap_method: str | None,
    batched: Any,
    also_aliased: frozenset[int] = frozenset(),
    **params: Any,
) -> tuple[Any, Any]:
    """The ``vmap`` rule of a bridge primitive: ``ffi_core.bridge.batch_call`` binding
    ``primitive`` again (one native call over the batch by default, or the
    ``jax.ffi`` methods). Bridges with a method of their own (numba-cuda-ffi's
    ``"fold"``) handle it and call this for the rest; ``also_aliased`` names
    inputs written in place besides those of ``aliases`` (Warp's adjoint
    kernel's cotangents)."""
    bind = functools.partial(primitive.bind, aliases=aliases, vmap_method=vmap_method, **params)
    return batch_call(
        bind,
        args,
        dims,
        out_avals=out_avals,
        batched=batched,
        vmap_method=vmap_method,
        aliased={i for i, _ in aliases} | also_aliased,
    )


def bridge_primitive(
    name: str,
    *,
    describe: Callable[[Mapping[str, Any]], str],
    fix: Callable[[Mapping[str, Any]], str | None] | None = None,
    batching_rule: Callable[..., Any] | None = None,
) -> Primitive:
    """A bridge primitive with its shared rules: several results, abstract
    evaluation from ``out_avals``, eager calls compiled once per parameters
    (``def_eager_impl``), ``vmap`` (``batching_rule``, default
    ``bridge_primitive_batching``), and JVP and transpose rules raising
    NotImplementedError naming the kernel (``describe(params)``) and the fix
    (``fix(params)``, a ``derivative_fix`` text; None: JAX's way alone; see
    ``raise_on_differentiation``). The bridge registers its lowerings.

    Example:
        >>> p = bridge_primitive("ffi_core_doc_kernel", describe=lambda params: "kernel 'k'")
        >>> p.multiple_results
        True
    """
    primitive = Primitive(name)
    primitive.multiple_results = True
    def_eager_impl(primitive)
    primitive.def_abstract_eval(bridge_primitive_abstract_eval)
    batching.primitive_batchers[primitive] = batching_rule or functools.partial(
        bridge_primitive_batching, primitive
    )
    raise_on_differentiation(primitive, describe=describe, fix=fix)
    return primitive


@dataclasses.dataclass(frozen=True)
class Bind:
    """What a bridge's launch returns: the primitive and parameters that
    ``kernel_op`` binds the call's arrays with,
    ``primitive.bind(*args, out_avals=out_avals, **dict(params))``.
    Hashable, so equal calls bind equal parameters (eager calls hit JAX's cache).

    Example:
        >>> p = bridge_primitive("ffi_core_doc_bind", describe=lambda params: "kernel 'k'")
        >>> Bind(p, (("scale", 2),)).params
        (('scale', 2),)
    """

    primitive: Primitive
    params: tuple[tuple[str, Any], ...]


def planned_bind(
    primitive: Primitive,
    planner: Any,
    *,
    aliases: Sequence[tuple[int, int]],
    vmap_method: str | None,
    attrs: Sequence[tuple[str, str, Any]],
) -> Bind:
    """The ``Bind`` of a planner-driven bridge primitive (``cuda_launch_p``,
    ``cpu_call_p``) for one unbatched call, its parameters normalized
    (tuples, ``attrs`` sorted by name) so that equal calls bind equal ones."""
    return Bind(
        primitive,
        (
            ("planner", planner),
            ("aliases", tuple(aliases)),
            ("vmap_method", vmap_method),
            ("batched", None),
            ("attrs", tuple(sorted(attrs))),
        ),
    )


def bind_call(bind: Bind, args: Sequence[Any], out_avals: Sequence[Any]) -> list[Any]:
    """Bind ``args`` as ``bind`` says: the outputs of ``out_avals``."""
    return list(bind.primitive.bind(*args, out_avals=tuple(out_avals), **dict(bind.params)))


def planned_lowering_args(
    aliases: Sequence[tuple[int, int]], attrs: Sequence[tuple[str, str, Any]]
) -> dict[str, Any]:
    """The ``aliases`` and ``attrs`` keywords of a planner-driven lowering
    (``lower_cpu_call``, ``lower_launch``) from the primitive's parameters:
    aliases as a dict, each ``(name, dtype, value)`` attribute as its value
    as XLA takes it (``attribute_value``)."""
    return {
        "aliases": dict(aliases),
        "attrs": {n: attribute_value(dtype, v) for n, dtype, v in attrs},
    }


def wrong_platform_lowering(
    runs_on: str, placed_on: str, put_on: str, device: str
) -> Callable[..., Any]:
    """A lowering of a planner-driven primitive for a platform its kernels do
    not run on: it raises ``WrongPlatformError`` naming the kernel (the
    planner's ``label``), where it runs and how to place its inputs (on a
    ``jax.devices(device)`` device).

    Example:
        >>> from types import SimpleNamespace
        >>> lower = wrong_platform_lowering("the CPU only", "an accelerator", "the CPU", "cpu")
        >>> try:
        ...     lower(None, planner=SimpleNamespace(label="kernel 'k'"))
        ... except WrongPlatformError as exc:
        ...     print(str(exc).split(";")[0])
        kernel 'k' runs on the CPU only, but this computation is placed on an accelerator
    """

    def lowering(ctx, *operands, planner, **params):
        del ctx, operands, params
        raise WrongPlatformError(
            f"{planner.label} runs on {runs_on}, but this computation is placed on "
            f"{placed_on}; put its inputs on {put_on} "
            f"(jax.device_put(x, jax.devices('{device}')[0]))"
        )

    return lowering
