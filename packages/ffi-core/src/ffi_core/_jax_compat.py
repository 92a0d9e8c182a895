"""The JAX API that the bridges use without a public, stable equivalent: one place.

Every use of JAX internals by ffi-core, numba-cpu-ffi and numba-cuda-ffi goes
through a function here, so a JAX release that moves one is fixed in one file,
and so each can be swapped for public API the day JAX offers it.

``def_eager_impl(prim)``
    Gives a primitive the eager implementation JAX's own primitives have: the
    primitive alone, compiled with XLA once per parameters and input
    shapes/dtypes, then cached. It is ``jax._src.dispatch.apply_primitive``
    (what ``jax._src.dispatch.simple_impl`` installs), reached through its
    re-export ``jax.interpreters.xla.apply_primitive``, the same function
    object in jax 0.10.2 and 0.12.0.1. Neither is covered by JAX's API
    compatibility policy: ``jax._src`` and ``jax.interpreters`` are both listed
    under "What is not covered". JAX has no public equivalent: neither
    ``jax.extend.core`` nor ``jax.ffi`` offers one. Built from public API
    instead, ``jax.jit(lambda *a: prim.bind(*a, **params))`` made per call
    traces and lowers on every call (a fresh function never hits jit's cache);
    caching that jit per ``params`` avoids the retrace but recurses without end
    under ``jax.disable_jit()``, which ``apply_primitive`` switches off for the
    primitive's own call. Replace with the public API when JAX offers one.

``require_devices_at_lowering(prim)``
    Makes ``jax.jit`` lower a computation holding ``prim`` with its concrete
    devices known, as ``jax.experimental.custom_partitioning`` needs (JAX adds
    its own ``custom_partitioning_p`` and its cuDNN attention primitives the
    same way). It adds ``prim`` to ``jax._src.dispatch.
    prim_requires_devices_during_lowering``, the same set in jax 0.10.2 and
    0.12.0.1; JAX has no public equivalent.

``for_export(ctx)`` / ``lowering_device_count(ctx)``
    Whether a lowering rule runs for ``jax.export``, and over how many devices
    the computation is lowered: ``ctx.module_context.lowering_parameters.
    for_export`` and ``ctx.module_context.axis_context`` (its ``num_devices``,
    or its mesh's size), fields of ``jax.interpreters.mlir.LoweringRuleContext``
    that JAX does not document.

``with_varying_axes(out_avals, avals)``
    The outputs' avals, each marked as varying along the manual mesh axes
    along which any input varies (``shard_map(..., check_vma=True)``), as
    JAX's own primitives mark theirs. An aval keeps that set in
    ``aval.manual_axis_type.varying`` (a ``ManualAxisType``, set with
    ``aval.update(manual_axis_type=...)``) in jax 0.10.2 and 0.11.1, and
    in ``aval.vma`` (set with ``aval.update(vma=...)``) in the jax releases
    before them; neither is documented as public API. An output whose mesh is
    empty (a ``jax.ShapeDtypeStruct``'s) gets the current mesh's sharding, as
    ``jax.ffi.ffi_call``'s outputs do, since an aval of the empty mesh carries
    no manual axes. Outside ``shard_map`` (no input varies) the avals are
    returned unchanged.

``distributed_client()``
    The key-value client of ``jax.distributed.initialize`` (``key_value_set``,
    ``blocking_key_value_get``), through which one process of a multi-process
    program shares a value with the others (kernel-bench's autotuner: process
    0's decisions). JAX keeps it as ``jax._src.distributed.global_state.
    client``, the same in jax 0.10.2 and 0.12.0.1; ``jax.distributed`` offers
    ``initialize``/``shutdown`` only. It is read, never changed.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from jax.extend.core import Primitive
from jax.interpreters import xla

__all__ = [
    "def_eager_impl",
    "distributed_client",
    "for_export",
    "lowering_device_count",
    "require_devices_at_lowering",
    "with_varying_axes",
]


def def_eager_impl(prim: Primitive) -> None:
    """Make eager calls of ``prim`` compile it with XLA once and run it.

    The compiled primitive is cached per parameters and input shapes/dtypes, as
    for JAX's own primitives: a second eager call with the same ones neither
    retraces nor lowers again. Under ``jax.jit`` the primitive is lowered with
    the rest of the computation and this implementation is not used.

    Example:
        >>> import jax.numpy as jnp
        >>> from jax.extend.core import Primitive
        >>> from jax.interpreters import mlir
        >>> twice_p = Primitive("ffi_core_doc_twice")
        >>> _ = twice_p.def_abstract_eval(lambda x: x)
        >>> mlir.register_lowering(twice_p, mlir.lower_fun(lambda x: 2 * x, False))
        >>> def_eager_impl(twice_p)
        >>> twice_p.bind(jnp.arange(3.0))
        Array([0., 2., 4.], dtype=float32)

    Raises:
        TypeError: ``prim`` is not a ``jax.extend.core.Primitive``.
    """
    # Private JAX API, see the module docstring: jax.interpreters.xla re-exports
    # jax._src.dispatch.apply_primitive. Swap for a public equivalent once JAX
    # has one; jax.jit of a bind lambda is not one (retraces, or recurses under
    # jax.disable_jit()).
    if not isinstance(prim, Primitive):
        raise TypeError(
            f"`prim` must be a jax.extend.core.Primitive, got {type(prim).__name__}: {prim!r}"
        )
    prim.def_impl(functools.partial(xla.apply_primitive, prim))


def require_devices_at_lowering(prim: Primitive) -> None:
    """Make ``jax.jit`` lower computations holding ``prim`` with their devices known.

    A lowering rule that uses ``jax.experimental.custom_partitioning`` needs
    them; see the module docstring.
    """
    # Private JAX API, see the module docstring.
    from jax._src import dispatch

    dispatch.prim_requires_devices_during_lowering.add(prim)


def for_export(ctx: Any) -> bool:
    """Whether the lowering rule context ``ctx`` lowers for ``jax.export``."""
    params = getattr(ctx.module_context, "lowering_parameters", None)
    return bool(getattr(params, "for_export", False))


def lowering_device_count(ctx: Any) -> int:
    """Over how many devices the lowering rule context ``ctx`` lowers a
    computation that XLA's partitioner splits (1 inside a ``shard_map`` over
    every mesh axis)."""
    axis_context = ctx.module_context.axis_context
    count = getattr(axis_context, "num_devices", None)
    if count is None:
        mesh = getattr(axis_context, "mesh", None)
        if mesh is None:
            return 1
        # Inside shard_map over every mesh axis each device's program is its
        # own: nothing is left for the partitioner to split.
        manual = set(getattr(axis_context, "manual_axes", ()))
        count = 1 if manual >= set(mesh.axis_names) else mesh.size
    return int(count)


def _varying(aval: Any) -> frozenset[Any]:
    mat = getattr(aval, "manual_axis_type", None)
    if mat is not None:
        return frozenset(mat.varying)
    return frozenset(getattr(aval, "vma", ()))


def with_varying_axes(out_avals: Sequence[Any], avals: Sequence[Any]) -> list[Any]:
    """``out_avals``, each varying along every manual mesh axis along which
    one of ``avals`` (the inputs) varies; see the module docstring.

    Example:
        >>> import jax, numpy as np
        >>> out = jax.core.ShapedArray((2,), np.float32)
        >>> with_varying_axes([out], [jax.core.ShapedArray((3,), np.int32)]) == [out]
        True
    """
    # Private JAX API, see the module docstring.
    varying = frozenset().union(*(_varying(a) for a in avals))
    if not varying:
        return list(out_avals)
    from jax._src import core

    result = []
    for aval in out_avals:
        if aval.sharding.mesh.empty:
            aval = aval.update(sharding=core.get_cur_mesh_sharding())
        if hasattr(aval, "manual_axis_type"):
            mat = aval.manual_axis_type.update(varying=varying | aval.manual_axis_type.varying)
            result.append(aval.update(manual_axis_type=mat))
        else:
            result.append(aval.update(vma=varying | frozenset(aval.vma)))
    return result


def distributed_client() -> Any:
    """The key-value client of ``jax.distributed.initialize``, or None where it
    was not called (a single-process program) or JAX keeps it elsewhere.

    Example:
        >>> distributed_client() is None  # no jax.distributed.initialize here
        True
    """
    # Private JAX API, see the module docstring.
    try:
        from jax._src import distributed
    except ImportError:
        return None
    state = getattr(distributed, "global_state", None)
    return getattr(state, "client", None)
