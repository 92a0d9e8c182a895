"""Kernels that run on each device's shard under a sharded ``jit``.

XLA treats a custom call as opaque: under ``jit`` with sharded inputs it
gathers every operand onto every device and runs the whole call there. A call
made through ``partitioned_call`` with a ``ShardingRule`` is lowered through
``jax.experimental.custom_partitioning`` with Shardy's ``sharding_rule``
instead: Shardy propagates shardings through it, and the partition callback
(run by XLA while compiling) picks, from the operands' shardings, one
split per factor, then traces the same call on the *local* shapes (the
bridge's ordinary native call, same handler) and sums partial results over the
mesh axes that split a reduction factor (``jax.lax.psum``).

``partitioned_call_p`` is a higher-order primitive: its parameter ``call``
makes the bridge's own call for given output avals, so a bridge passes its
rule through and changes nothing else. ``jax.vmap`` of it vmaps that call and
adds the batch axis to the rule as an independent factor; ``jax.jvp`` and
``jax.linear_transpose`` run the call's own rules (unpartitioned). Inside
``shard_map`` (every mesh axis manual) and on one device it is the plain call.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.custom_partitioning import custom_partitioning
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .._jax_compat import (
    def_eager_impl,
    for_export,
    lowering_device_count,
    require_devices_at_lowering,
    with_varying_axes,
)
from ._rule import ShardingRule

__all__ = ["BoundPrimitive", "ShapedCall", "partitioned_call", "partitioned_call_p"]


@dataclasses.dataclass(frozen=True)
class BoundPrimitive:
    """A bridge's call for given output avals: ``primitive.bind(*args, **params,
    <out_param>=out_avals)``. Hashable, so eager calls hit JAX's compile cache.

    Example:
        >>> from jax import lax
        >>> from jax.extend.core import Primitive
        >>> call = BoundPrimitive(Primitive("demo"), (("scale", 2),))
        >>> call.params
        (('scale', 2),)
    """

    primitive: Primitive
    params: tuple[tuple[str, Any], ...]
    out_param: str = "out_avals"

    def __call__(self, out_avals: tuple[Any, ...], *args: Any) -> list[Any]:
        return list(self.primitive.bind(*args, **dict(self.params), **{self.out_param: out_avals}))


@dataclasses.dataclass(frozen=True)
class ShapedCall:
    """A bridge's call whose scalar values may follow the arrays' shapes:
    ``launch(out_avals, args, values)``, where each value of ``values`` that
    is callable is replaced by its result on the tuple of the input shapes
    (a shard's, under a sharding rule). Hashable when its fields are.

    Example:
        >>> import numpy as np
        >>> call = ShapedCall(lambda outs, args, values: [values["n"]], (("n", lambda s: s[0][0]),))
        >>> call((), np.zeros(6))
        [6]
    """

    launch: Callable[..., Sequence[Any]]
    values: tuple[tuple[str, Any], ...]

    def __call__(self, out_avals: tuple[Any, ...], *args: Any) -> list[Any]:
        return list(self.launch(out_avals, args, shaped_values(dict(self.values), args)))


def shaped_values(values: dict[str, Any], args: Sequence[Any]) -> dict[str, Any]:
    """``values`` with each callable replaced by its result on the tuple of
    the shapes of ``args``.

    Example:
        >>> import numpy as np
        >>> shaped_values({"n": lambda shapes: shapes[0][0], "a": 2.0}, [np.zeros(5)])
        {'n': 5, 'a': 2.0}
    """
    shapes = tuple(tuple(np.shape(x)) for x in args)
    return {k: v(shapes) if callable(v) else v for k, v in values.items()}


@dataclasses.dataclass(frozen=True)
class VmappedCall:
    """``call`` (a bridge's call for given output avals) under ``jax.vmap``:
    the batch is the leading axis of the inputs ``in_batched`` marks and of
    every output. What the batching rule of a higher-order primitive whose
    parameter is such a call binds it with."""

    call: Callable[..., Sequence[Any]]
    in_batched: tuple[bool, ...]

    def __call__(self, out_avals: tuple[Any, ...], *args: Any) -> list[Any]:
        inner = tuple(a.update(shape=a.shape[1:]) for a in out_avals)
        in_axes = tuple(0 if b else None for b in self.in_batched)
        return list(jax.vmap(lambda *a: tuple(self.call(inner, *a)), in_axes=in_axes)(*args))


def partitioned_call(
    call: Callable[..., Sequence[Any]],
    args: Sequence[Any],
    out_avals: Sequence[Any],
    rule: ShardingRule | None,
) -> list[Any]:
    """``call(out_avals, *args)``, partitioned under a sharded ``jit`` by ``rule``.

    Args:
        call: makes the bridge's own call (a primitive bind) for the output
            avals it is given: the global ones, or a shard's. Hashable (a
            ``BoundPrimitive``) where eager calls should hit JAX's cache.
        args: the inputs.
        out_avals: the outputs' avals (global shapes).
        rule: a ``ShardingRule`` already ``resolve``-d against these shapes,
            or None for the plain call (replicated under a sharded ``jit``).

    Returns:
        The outputs, a list.
    """
    out_avals = tuple(out_avals)
    if rule is None:
        return list(call(out_avals, *args))
    return list(partitioned_call_p.bind(*args, call=call, out_avals=out_avals, rule=rule))


# --------------------------------------------------------------- partitioning


def _dim_axes(spec: Any, ndim: int) -> list[tuple[str, ...]]:
    entries = list(spec) + [None] * (ndim - len(spec))
    out: list[tuple[str, ...]] = []
    for entry in entries[:ndim]:
        if entry is None or entry is P.UNCONSTRAINED:
            out.append(())
        elif isinstance(entry, str):
            out.append((entry,))
        else:
            out.append(tuple(entry))
    return out


def _spec(factors: Sequence[str], split: dict[str, tuple[str, ...]]) -> P:
    entries = []
    for factor in factors:
        axes = split.get(factor, ())
        entries.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    return P(*entries)


def _split(rule: ShardingRule, mesh: Mesh, arg_shapes: Sequence[Any]) -> dict[str, tuple[str, ...]]:
    # One split per factor: the first operand dimension of that factor that is
    # split, where its mesh axes are free (one mesh axis splits one factor) and
    # divide the factor's size. The rest stay whole.
    split: dict[str, tuple[str, ...]] = {}
    used: set[str] = set()
    whole = rule.whole_factors
    # Resolved: its inputs' factors are named (the cast: "elementwise" has them only then).
    inputs = cast("tuple[tuple[str, ...], ...]", rule.inputs)
    for factors, shape in zip(inputs, arg_shapes, strict=True):
        sharding = shape.sharding
        if not isinstance(sharding, NamedSharding):
            continue
        dims = _dim_axes(sharding.spec, len(factors))
        for factor, axes, size in zip(factors, dims, shape.shape, strict=True):
            if not axes or factor in split or factor in whole:
                continue
            if used & set(axes) or size % math.prod(mesh.shape[a] for a in axes):
                continue
            split[factor] = axes
            used |= set(axes)
    return split


def _mesh_of(mesh: Mesh, arg_shapes: Sequence[Any]) -> Mesh:
    # custom_partitioning hands an empty mesh when the shardings carry none
    # (not NamedShardings): everything then stays whole, on a mesh of its own.
    if not mesh.empty:
        return mesh
    devices = sorted(arg_shapes[0].sharding.device_set, key=lambda d: d.id)
    return Mesh(np.array(devices), ("_ffi_core_devices",))


def _partitioner(
    call: Callable[..., Sequence[Any]], rule: ShardingRule
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def partition(mesh, arg_shapes, result_shape):
        mesh = _mesh_of(mesh, arg_shapes)
        results = result_shape if isinstance(result_shape, tuple | list) else (result_shape,)
        split = _split(rule, mesh, arg_shapes)
        arg_shardings = tuple(NamedSharding(mesh, _spec(f, split)) for f in rule.inputs)
        out_shardings = tuple(NamedSharding(mesh, _spec(f, split)) for f in rule.outputs)
        local = tuple(
            jax.core.ShapedArray(s.shard_shape(tuple(r.shape)), r.dtype)
            for s, r in zip(out_shardings, results, strict=True)
        )
        reduce_axes = tuple(a for f in rule.reduction_factors for a in split.get(f, ()))

        def lower_fn(*args):
            outs = call(local, *args)
            if reduce_axes:
                outs = [jax.lax.psum(o, reduce_axes) for o in outs]
            return tuple(outs)

        return mesh, lower_fn, out_shardings, arg_shardings

    def infer_sharding_from_operands(mesh, arg_shapes, result_shape):
        # The GSPMD partitioner's question (jax_use_shardy_partitioner=False).
        mesh = _mesh_of(mesh, arg_shapes)
        split = _split(rule, mesh, arg_shapes)
        return tuple(NamedSharding(mesh, _spec(f, split)) for f in rule.outputs)

    return partition, infer_sharding_from_operands


# ------------------------------------------------------------------ primitive

partitioned_call_p = Primitive("ffi_partitioned_call")
partitioned_call_p.multiple_results = True


def _partitioned_call_abstract_eval(*avals, call, out_avals, rule):
    del call, rule
    return with_varying_axes(out_avals, avals)


def _partitioned_call_lowering(ctx, *operands, call, out_avals, rule: ShardingRule):
    devices = lowering_device_count(ctx)
    if devices > 1 and for_export(ctx):
        raise NotImplementedError(
            f"a kernel with `sharding_rule` {rule.rule!r} is exported for {devices} devices, "
            "but jax.export cannot serialize the partitioning callback it runs on "
            "(jax.experimental.custom_partitioning); call the kernel inside jax.shard_map "
            "(each device then runs it on its shard, and that exports), or export for one "
            "device"
        )

    def plain(*args):
        return tuple(call(out_avals, *args))

    if devices <= 1:
        return mlir.lower_fun(plain, multiple_results=True)(ctx, *operands)
    partitioned = custom_partitioning(plain)
    partition, infer = _partitioner(call, rule)
    partitioned.def_partition(
        partition,
        infer_sharding_from_operands=infer,
        sharding_rule=rule.rule,
        reduction_factors=rule.reduction_factors,
        need_replication_factors=rule.whole_factors,
    )
    return mlir.lower_fun(lambda *args: list(partitioned(*args)), multiple_results=True)(
        ctx, *operands
    )


def _partitioned_call_batching(args, dims, *, call, out_avals, rule: ShardingRule):
    size = next(x.shape[d] for x, d in zip(args, dims, strict=True) if d is not None)
    moved = [x if d is None else jnp.moveaxis(x, d, 0) for x, d in zip(args, dims, strict=True)]
    in_batched = tuple(d is not None for d in dims)
    outs = partitioned_call_p.bind(
        *moved,
        call=VmappedCall(call, in_batched),
        out_avals=tuple(a.update(shape=(size, *a.shape)) for a in out_avals),
        rule=rule.batched(in_batched),
    )
    return outs, [0] * len(outs)


def _partitioned_call_jvp(primals, tangents, *, call, out_avals, rule):
    # Derivatives are the call's own rules (a bridge's JVP, or its error naming
    # the fix); they run unpartitioned.
    del rule
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    outs, out_tangents = jax.jvp(
        lambda *a: tuple(call(out_avals, *a)), tuple(primals), tuple(tangents)
    )
    return list(outs), list(out_tangents)


def _partitioned_call_transpose(cts, *args, call, out_avals, rule):
    # Transposition is the call's own rule too (a bridge's, or its error
    # naming the kernel and the fix), run unpartitioned: without this rule
    # jax.linear_transpose would stop at JAX's generic message naming
    # partitioned_call, not the kernel.
    del rule
    linear = [ad.is_undefined_primal(x) for x in args]

    def call_of_linear(*values):
        it = iter(values)
        full = [next(it) if lin else x for x, lin in zip(args, linear, strict=True)]
        return tuple(call(out_avals, *full))

    primals = [
        jax.ShapeDtypeStruct(x.aval.shape, x.aval.dtype)
        for x, lin in zip(args, linear, strict=True)
        if lin
    ]
    cts = tuple(
        jnp.zeros(a.shape, a.dtype) if type(ct) is ad.Zero else ct
        for ct, a in zip(cts, out_avals, strict=True)
    )
    grads = iter(jax.linear_transpose(call_of_linear, *primals)(cts))
    return [next(grads) if lin else None for lin in linear]


# The rules of partitioned_call_p, in one place.
def_eager_impl(partitioned_call_p)
partitioned_call_p.def_abstract_eval(_partitioned_call_abstract_eval)
mlir.register_lowering(partitioned_call_p, _partitioned_call_lowering)
batching.primitive_batchers[partitioned_call_p] = _partitioned_call_batching
ad.primitive_jvps[partitioned_call_p] = _partitioned_call_jvp
ad.primitive_transposes[partitioned_call_p] = _partitioned_call_transpose
require_devices_at_lowering(partitioned_call_p)
