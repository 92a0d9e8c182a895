"""``kernel_op``: the public function of every bridge, built once.

Every bridge's ``numba_kernel``/``triton_kernel``/... does the same on the
JAX side: turn ``outs`` into avals, check ``vmap_method``, the aliases and
the sharding rule when the kernel is wrapped; on each call check the arity,
the scalar keywords and the inputs, resolve the sharding rule for the call's
arrays, bind, and rebuild the caller's output structure; and name the op
after the kernel. Here that is written once. A bridge passes only what is its
own: its ``KernelInfo``, its dtype table, its launch (a primitive bind, or a
planner given to ``ffi_core.bridge.cuda.cuda_launch``), and, where it has them, its
scalar and extra checks and a derivative.

Order of the checks of one call (a bridge's hooks in brackets): [arity],
[scalars: their names], the inputs (arrays of accepted dtypes, aliased pairs
that match), [check_call: everything else, with scalar values evaluated on
the whole arrays' shapes], the sharding rule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from .._checks import check_aliases, check_arity, check_inputs
from .._outs import output_avals
from .._rules import Bind, bind_call
from .._spec import VMAP_METHODS, KernelDTypes, check_vmap_method
from ..sharding._partition import partitioned_call, shaped_values
from ..sharding._rule import ShardingRule, check_sharding_rule, resolve_sharding_rule
from ._info import KernelInfo

__all__ = ["BoundCall", "KernelCall", "Launch", "kernel_op"]


@dataclasses.dataclass(frozen=True)
class KernelCall:
    """What is fixed when a kernel is wrapped: what a bridge's launch reads.

    Attributes:
        info: the bridge's ``KernelInfo``.
        out_avals: the outputs' avals (whole arrays).
        aliases: ``(input, output)`` pairs, from ``check_aliases``.
        vmap_method: the checked ``vmap_method``.
    """

    info: Any
    out_avals: tuple[Any, ...]
    aliases: tuple[tuple[int, int], ...]
    vmap_method: str | None

    @property
    def options(self) -> dict[str, Any]:
        """What the call fixes of a launch, as the keywords of
        ``ffi_core.bridge.cuda.cuda_launch`` and ``ffi_core.bridge.cpu.cpu_call``:
        ``aliases`` and ``vmap_method``."""
        return {"aliases": self.aliases, "vmap_method": self.vmap_method}


class Launch(Protocol):
    """A bridge's launch: ``launch(call, out_avals, args, scalars)`` says what
    to bind for these arrays, a ``Bind`` (its primitive, or
    ``ffi_core.bridge.cuda.cuda_launch_p``, with the call's parameters), and
    ``kernel_op`` binds it. A launch that computes with jnp code instead
    returns the outputs. ``out_avals`` are the whole arrays' or a shard's,
    and ``scalars`` the call's scalar keywords evaluated on ``args``' shapes.
    Hashable and the same on every call of one op (eager calls then hit JAX's
    cache): a module-level function, or a frozen dataclass holding the
    bridge's own options (its launch configuration, say)."""

    def __call__(
        self,
        call: KernelCall,
        out_avals: tuple[Any, ...],
        args: Sequence[Any],
        scalars: Mapping[str, Any],
    ) -> Bind | Sequence[Any]: ...


@dataclasses.dataclass(frozen=True)
class _OnShard:
    # A BoundCall without its rule, as partitioned_call calls it: for the
    # output avals of the whole arrays or of a shard.
    bound: BoundCall

    def __call__(self, out_avals: tuple[Any, ...], *args: Any) -> list[Any]:
        return self.bound(*args, out_avals=out_avals)


@dataclasses.dataclass(frozen=True)
class BoundCall:
    """One call of a wrapped kernel, ready to run (hashable).

    ``bound(*args)`` asks ``launch`` what to bind for the arrays and binds
    it, partitioned by ``rule`` under a sharded ``jit``; ``out_avals=`` runs it for other outputs (a
    derivative's). A bridge with a derivative (Warp's adjoint) receives it as
    the non-differentiable argument of its ``jax.custom_vjp`` and may
    ``dataclasses.replace`` its launch and rule for the backward call.

    Attributes:
        launch: the bridge's ``Launch``.
        call: what is fixed for the kernel (``KernelCall``).
        scalars: the call's scalar keywords, sorted ``(name, value)``; a value
            may be a callable of the input shapes.
        rule: the sharding rule resolved for these arrays, or None.
    """

    launch: Launch
    call: KernelCall
    scalars: tuple[tuple[str, Any], ...] = ()
    rule: ShardingRule | None = None

    def __call__(self, *args: Any, out_avals: Sequence[Any] | None = None) -> list[Any]:
        avals = self.call.out_avals if out_avals is None else tuple(out_avals)
        if self.rule is not None:
            on_shard = _OnShard(dataclasses.replace(self, rule=None))
            return partitioned_call(on_shard, args, avals, self.rule)
        scalars = dict(self.scalars)
        if any(callable(v) for v in scalars.values()):
            scalars = shaped_values(scalars, args)
        bind = self.launch(self.call, avals, args, scalars)
        if isinstance(bind, Bind):
            return bind_call(bind, args, avals)
        return list(bind)


def _no_scalars(info: KernelInfo) -> Callable[[Sequence[Any], Mapping[str, Any]], Mapping]:
    def scalars(args: Sequence[Any], given: Mapping[str, Any]) -> Mapping[str, Any]:
        del args
        if given:
            raise TypeError(
                f"{info.called} takes arrays only (no scalar parameters), got the keyword(s) "
                f"{sorted(given)}"
            )
        return {}

    return scalars


def kernel_op(
    info: KernelInfo,
    outs: Any,
    *,
    dtypes: KernelDTypes,
    launch: Launch,
    vmap_method: str | None = None,
    vmap_methods: Sequence[str | None] = VMAP_METHODS,
    input_output_aliases: dict[int, int] | None = None,
    sharding_rule: Any = None,
    arity: Callable[[int, int], object] | None = None,
    scalars: Callable[[Sequence[Any], Mapping[str, Any]], Mapping[str, Any]] | None = None,
    check_outs: Callable[[tuple[Any, ...]], object] | None = None,
    check_call: Callable[[Sequence[Any], Mapping[str, Any]], object] | None = None,
    derivative: Callable[..., Sequence[Any]] | None = None,
) -> Callable[..., Any]:
    """The JAX operation ``op(*inputs, **scalars)`` of a bridge's kernel.

    The user's arguments (``outs``, ``vmap_method``, ``input_output_aliases``,
    ``sharding_rule``) are checked here, now; the bridge has validated the
    kernel (``info``) and its own options before.

    Args:
        info: the bridge's ``KernelInfo``: ``name`` names the op,
            ``called`` the argument checks, ``label`` the op's ``__doc__``.
        outs: the user's ``outs`` (see ``ffi_core.bridge.output_avals``).
        dtypes: the bridge's dtype table (``KernelDTypes``), for outputs and
            inputs.
        launch: runs the kernel (see ``Launch``).
        vmap_method: the user's; one of ``vmap_methods``.
        vmap_methods: what the bridge accepts (``ffi_core.bridge.VMAP_METHODS``, or
            ``(*VMAP_METHODS, "fold")``).
        input_output_aliases: the user's ``{input index: output index}``.
        sharding_rule: the user's (see ``ffi_core.bridge.check_sharding_rule``).
        arity: ``arity(n_inputs, n_outputs)`` raises for a call the kernel
            cannot take. Default: ``ffi_core.bridge.check_arity`` with
            ``info.n_params`` (``kernel(in_1, ..., in_n, out_1, ..., out_m)``).
        scalars: ``scalars(args, given)`` checks a call's keywords (their
            names: values may still be callables of the input shapes) and
            returns them. Default: a call with keywords is a TypeError.
        check_outs: ``check_outs(out_avals)``: the bridge's checks of the
            outputs against its kernel, when it is wrapped.
        check_call: ``check_call(args, scalars)``: the bridge's checks of one
            call after the inputs' (scalar values on the whole arrays' shapes,
            declared dtypes, a device present).
        derivative: ``derivative(bound, *args)``: a ``jax.custom_vjp`` (with
            ``bound``, a ``BoundCall``, non-differentiable) giving the op a
            derivative. Default: ``bound(*args)``, whose primitive's JVP and
            transpose rules name the kernel and the fix.

    Returns:
        The op, named after the kernel; it returns the outputs in the
        structure of ``outs``.

    Raises:
        TypeError, ValueError: a user argument is not accepted (the message
            names it).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> def launch(call, out_avals, args, scalars):
        ...     x, y = args
        ...     return [x + y]  # a bridge returns the Bind of its primitive here
        >>> info = KernelInfo(name="add", label="toy kernel 'add'", qualname="doc.add", digest="00")
        >>> add = kernel_op(
        ...     info,
        ...     jax.ShapeDtypeStruct((3,), "float32"),
        ...     dtypes=KernelDTypes(("float32",), "toy kernels"),
        ...     launch=launch,
        ... )
        >>> add.__name__, add(jnp.ones(3, "float32"), jnp.ones(3, "float32"))
        ('add', Array([2., 2., 2.], dtype=float32))
        >>> add(jnp.ones(3, "int32"), jnp.ones(3, "float32"))
        Traceback (most recent call last):
        TypeError: input 0 of toy kernel 'add' has dtype int32, which toy kernels do not take; supported: float32
    """
    avals, rebuild = output_avals(outs, accepted=dtypes)
    check_vmap_method(vmap_method, accepted=vmap_methods)
    aliases = check_aliases(input_output_aliases, len(avals))
    rule = check_sharding_rule(sharding_rule)
    if check_outs is not None:
        check_outs(avals)
    call = KernelCall(info, avals, aliases, vmap_method)
    name = info.called
    check_scalars = _no_scalars(info) if scalars is None else scalars

    def op(*args: Any, **given: Any) -> Any:
        if arity is None:
            check_arity(info.n_params, len(args), len(avals), name=name)
        else:
            arity(len(args), len(avals))
        values = dict(check_scalars(args, given))
        check_inputs(args, avals, aliases, name=name, accepted=dtypes)
        if check_call is not None:
            check_call(args, shaped_values(values, args))
        resolved = resolve_sharding_rule(rule, args, avals, name=name, aliases=aliases)
        bound = BoundCall(launch, call, tuple(sorted(values.items())), resolved)
        results = bound(*args) if derivative is None else derivative(bound, *args)
        return rebuild(tuple(results))

    op.__name__ = info.name
    op.__qualname__ = info.name
    op.__doc__ = f"{info.label} as a JAX operation."
    return op
