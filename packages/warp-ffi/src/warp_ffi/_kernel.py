"""``warp_kernel``: a ``@wp.kernel`` as a JAX operation, differentiable
through Warp's adjoint kernel."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import ffi_core
import ffi_core.bridge
import jax
import jax.numpy as jnp
import numpy as np
from ffi_core import ShardingRule
from ffi_core.bridge import Bind, BoundCall, KernelCall, bounds_checked, kernel_op

from ._catalog import kernel_info
from ._inout import check_in_out
from ._launch import check_block_dim, check_launch_dims
from ._primitive import backward_unavailable, warp_kernel_call_p
from ._spec import DTYPES, KernelInfo

__all__ = ["VMAP_METHODS", "kernel_info", "warp_kernel"]

#: Accepted ``vmap_method`` values, ffi-core's (every bridge's); None is the
#: default, one native call over the batch.
VMAP_METHODS: tuple[str | None, ...] = ffi_core.bridge.VMAP_METHODS


@dataclasses.dataclass(frozen=True)
class _Launch:
    """How a wrapped Warp kernel runs: its primitive, with the launch grid
    (``launch_dims``, checked), forward or the adjoint kernel."""

    launch_dims: Any
    backward: bool = False
    #: The array indices of the in-out parameters (``_inout``).
    in_out: tuple[int, ...] = ()
    #: The user's ``block_dim`` (None: Warp's default for the device).
    block_dim: int | None = None
    #: ``warp_kernel``'s ``boundscheck``, resolved at each bind (``bounds_checked``).
    boundscheck: bool | None = None

    def __call__(self, call: KernelCall, out_avals: Any, args: Any, scalars: Any) -> Bind:
        del out_avals, args
        info: KernelInfo = call.info
        return Bind(
            warp_kernel_call_p,
            (
                ("info", info),
                ("aliases", () if self.backward else call.aliases),
                ("scalars", tuple((p.name, scalars[p.name]) for p in info.scalars)),
                ("launch", self.launch_dims),
                ("vmap_method", call.vmap_method),
                ("batched", None),
                ("backward", self.backward),
                ("in_out", self.in_out),
                ("block_dim", self.block_dim),
                ("boundscheck", bounds_checked(self.boundscheck, in_blocks=False)),
            ),
        )


def _adjoint_rule(rule: ShardingRule | None, n_in: int, n_out: int) -> ShardingRule | None:
    # The adjoint kernel reads (inputs, output cotangents) and writes (input
    # gradients, outputs, outputs): where every array of the forward rule has
    # the same factors, so do all of these; otherwise it runs unpartitioned.
    if rule is None or rule.inputs is None or rule.outputs is None:
        return None  # no factors: a rule resolved for the call always has them
    if len({*rule.inputs, *rule.outputs}) != 1:
        return None
    names = " ".join(rule.outputs[0])
    return ShardingRule(f"{', '.join([names] * n_in)} -> {', '.join([names] * n_out)}")


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _call(bound: BoundCall, *args: Any) -> tuple[Any, ...]:
    return tuple(bound(*args))


def _call_fwd(bound: BoundCall, *args: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    return _call(bound, *args), args


def _call_bwd(bound: BoundCall, args: tuple[Any, ...], cts: tuple[Any, ...]) -> tuple[Any, ...]:
    call = bound.call
    info = call.info
    in_out = cast(_Launch, bound.launch).in_out
    if in_out:
        names = ", ".join(f"'{info.arrays[k].name}'" for k in in_out)
        raise NotImplementedError(
            f"warp kernel '{info.name}' has in-out parameters ({names}); its gradient is not "
            "available: Warp's adjoint keeps one gradient per array, so an array both read "
            "and written would get its result's gradient added to its starting value's. "
            "To differentiate, give the kernel a separate input and output parameter for "
            "each (read 'x_in', write 'x_out')"
        )
    if call.aliases:
        raise NotImplementedError(
            f"warp kernel '{info.name}' is called with input_output_aliases; its gradient "
            "is not available (an aliased output's starting value would need its own "
            "adjoint): pass the starting value as a separate input instead"
        )
    options = info.kernel.module.options | info.kernel.options
    if not options.get("enable_backward", True):
        raise NotImplementedError(backward_unavailable(info))
    # Integer outputs have float0 cotangents: Warp reads zeros of the output's dtype.
    cts = tuple(
        jnp.zeros(a.shape, a.dtype) if ct.dtype == jax.dtypes.float0 else ct
        for ct, a in zip(cts, call.out_avals, strict=True)
    )
    grads_avals = tuple(jax.core.ShapedArray(np.shape(x), x.dtype) for x in args)
    out_avals = grads_avals + call.out_avals + call.out_avals
    backward = dataclasses.replace(
        bound,
        launch=dataclasses.replace(cast(_Launch, bound.launch), backward=True),
        rule=_adjoint_rule(bound.rule, len(args) + len(cts), len(out_avals)),
    )
    results = backward(*args, *cts, out_avals=out_avals)
    return tuple(g if jnp.issubdtype(g.dtype, jnp.inexact) else None for g in results[: len(args)])


_call.defvjp(_call_fwd, _call_bwd)


def warp_kernel(
    kernel: Any,
    outs: Any,
    *,
    launch_dims: Any = None,
    vmap_method: str | None = None,
    input_output_aliases: dict[int, int] | None = None,
    sharding_rule: Any = None,
    in_out_argnames: Sequence[str] | None = None,
    block_dim: int | None = None,
    boundscheck: bool | None = None,
) -> Callable[..., Any]:
    """Wrap a ``@wp.kernel`` as a JAX operation.

    The kernel's array parameters are the inputs then the outputs (its other
    parameters, scalars, may sit anywhere and are given as keywords). XLA calls
    a native handler that fills Warp's argument structs from the call frame and
    calls the kernel's compiled CPU entry point: no Python and no GIL per call,
    and one registration serves every shape.

    Args:
        kernel: a ``@wp.kernel``, or an overload of a generic one
            (``kernel.add_overload``), its parameters annotated in any of
            Warp's styles (``wp.array(dtype=float)``, ``wp.array[float]``,
            ``wp.array2d[...]``). Array parameters: ``wp.array`` of a scalar
            dtype (``float16/32/64``, ``int8``-``int64``, ``uint8``-``uint64``,
            ``bool``), of ``Any`` (specialized per dtype, once), or of Warp's
            vectors, matrices, quaternions and transforms of them (the JAX
            array has the element's axes last: ``wp.array[wp.mat22]`` of n
            elements is ``(n, 2, 2)``). Scalar parameters: those dtypes,
            ``float`` or ``int``.
        outs: the outputs, as a ``jax.ShapeDtypeStruct``, a sequence or a pytree
            of them. The call returns one array, a tuple or the same pytree.
            Outputs start uninitialized: a kernel that accumulates (``+=``,
            ``wp.atomic_add``) needs its starting values as an input aliased to
            the output (``input_output_aliases``).
        launch_dims: the ``wp.tid()`` grid: an int, a tuple of up to 4 ints, or
            a callable of the input shapes returning one. Default: the shape of
            the first output.
        vmap_method: how ``jax.vmap`` runs the kernel. None (default): one
            native call that launches the kernel once per batch row, each on
            its row's slices with the unbatched grid. ``"sequential"`` /
            ``"sequential_unrolled"``: one call per row in an XLA loop.
            ``"expand_dims"`` / ``"broadcast_all"``: the kernel gets the batched
            arrays and must declare their extra axis.
        input_output_aliases: ``{input index: output index}``; the output
            starts as (and reuses the buffer of) that input.
        sharding_rule: how the kernel runs on shards under a sharded ``jit``
            (``"elementwise"``, Shardy's einsum-like notation such as
            ``"i j, j -> i"``, or an ``ffi_core.ShardingRule``): each device
            launches the kernel on its local shard. The launch grid must then
            follow the shapes (``launch_dims`` None or a callable). None
            (default): XLA gathers sharded inputs and every device computes the
            whole result. The gradient's adjoint kernel is partitioned when
            every array of the rule has the same factors (``"elementwise"``),
            otherwise it runs on the whole arrays.
        in_out_argnames: names of array inputs the kernel both reads and
            writes (Warp's ``in_out_argnames``). Each one's new value is
            returned, aliased to the input: XLA gives the kernel the input's
            own buffer where it can donate it (copying it first otherwise).
            ``outs`` then describes only the output-only parameters (``()``
            when there are none), and the call returns a tuple: the in-out
            arrays in parameter order, then the outputs (the entries of a
            sequence ``outs``, or the one array or pytree). They are the
            first outputs for ``launch_dims`` (the default grid is the first
            in-out array's shape) and ``sharding_rule``. Not differentiable
            (Warp's adjoint keeps one gradient per array); not combined with
            ``input_output_aliases``.

        block_dim: threads per block of the launch, as Warp's
            ``wp.launch(..., block_dim=...)`` and ``jax_kernel(...,
            block_dim=...)`` take it (tile kernels cooperate across a block).
            None (default): Warp's default, 256 on a GPU (or the module's
            ``block_dim`` option) and 1 on the CPU. On the CPU a value above 1
            is honoured as Warp honours it: only with
            ``wp.config.enable_cpu_blocks`` (Warp's cooperative CPU blocks),
            else the CPU launch has 1 thread per block. The adjoint kernel
            runs with the same value.
        boundscheck: on the CPU, run a copy of the kernel built in Warp's debug
            mode (every array index checked), first in a forked child: an index
            out of range is an error naming the kernel and Warp's failed check
            instead of a write past a buffer, at a cost in speed (README).
            None (default): only when ``$FFI_CORE_BOUNDSCHECK=1`` (not
            inside ``check_kernel``'s block: a child per call is too slow
            for the calls it makes); False: never. A call placed on a GPU
            is not bounds-checked: it runs Warp's CUDA build as without the
            option, with a ``UserWarning`` when it is lowered (check a GPU
            kernel with ``check_kernel(..., sanitize=True)``).

    Returns:
        A function ``op(*inputs, **scalars)`` taking and returning JAX arrays.
        ``jax.grad``/``jax.vjp`` through it run Warp's adjoint kernel natively.

    Example:
        >>> import jax, jax.numpy as jnp, warp as wp
        >>> @wp.kernel
        ... def axpy(x: wp.array(dtype=float), y: wp.array(dtype=float), alpha: float,
        ...          out: wp.array(dtype=float)):
        ...     i = wp.tid()
        ...     out[i] = alpha * x[i] + y[i]
        >>> x = jnp.arange(4.0, dtype=jnp.float32)
        >>> f = warp_kernel(axpy, jax.ShapeDtypeStruct(x.shape, x.dtype))
        >>> jax.jit(lambda x, y: f(x, y, alpha=2.0))(x, x)
        Array([0., 3., 6., 9.], dtype=float32)
    """
    info = kernel_info(kernel)
    launch = check_launch_dims(launch_dims)
    if boundscheck is not None and not isinstance(boundscheck, bool):
        raise TypeError(f"`boundscheck` must be a bool or None, got {type(boundscheck)!r}")
    block = check_block_dim(block_dim)
    options = _Options(launch, vmap_method, sharding_rule, block, launch_dims, boundscheck)
    if in_out_argnames is None:
        op = _wrap(info, outs, options, input_output_aliases, ())
    else:
        op = _wrap_in_out(info, outs, options, input_output_aliases, in_out_argnames)
    # Its readers (check_kernel's report, help()) see the op as this module's,
    # the public function's, rather than the kit's that built it.
    op.__module__ = __name__
    return op


@dataclasses.dataclass(frozen=True)
class _Options:
    # The options of warp_kernel that every kernel_op of one wrapped kernel shares.
    launch: Any
    vmap_method: str | None
    sharding_rule: Any
    block_dim: int | None
    launch_dims: Any  # as given, for messages
    boundscheck: bool | None


def _check_outs(
    info: KernelInfo, options: _Options, out_avals: tuple[Any, ...], batched_ranks: bool
) -> None:
    """The output-only avals against the kernel's last array parameters."""
    if options.sharding_rule is not None and isinstance(options.launch, tuple):
        raise ValueError(
            f"`launch_dims` is fixed ({options.launch_dims!r}), but with `sharding_rule` the kernel "
            "runs on shards whose shapes differ from the whole arrays; pass "
            "launch_dims=None (the first output's shape) or a callable of the input shapes"
        )
    n_out = len(out_avals)
    if n_out > len(info.arrays):
        raise TypeError(
            f"`outs` holds {n_out} outputs, but warp kernel '{info.name}' has "
            f"{len(info.arrays)} array parameters"
        )
    params = info.arrays[len(info.arrays) - n_out :]
    for j, (p, aval) in enumerate(zip(params, out_avals, strict=True)):
        dtype = np.dtype(aval.dtype).name
        shape = tuple(aval.shape)
        inner = shape[len(shape) - len(p.shape) :]
        if (p.dtype is not None and p.dtype != dtype) or (
            not batched_ranks and (p.rank != len(shape) or p.shape != inner)
        ):
            raise TypeError(
                f"`outs` entry {j} is {dtype}{list(shape)}, but warp kernel "
                f"'{info.name}' declares its output parameter '{p.name}' as "
                f"{p.declared()}"
            )


def _wrap(
    info: KernelInfo,
    outs: Any,
    options: _Options,
    input_output_aliases: dict[int, int] | None,
    in_out: tuple[int, ...],
) -> Callable[..., Any]:
    """The kernel_op of the kernel; with in-out parameters, for one shape of
    them: ``outs`` then starts with their avals, aliased to their inputs."""
    # With "expand_dims"/"broadcast_all" the kernel declares the batched
    # ranks: those are checked when a call is lowered.
    batched_ranks = options.vmap_method in ("expand_dims", "broadcast_all")
    # The outputs' avals as kernel_op made them, for check_call (which is
    # given the inputs only); the in-out ones are inputs to the kernel.
    wrapped_outs: list[tuple[Any, ...]] = []

    def check_outs(out_avals: tuple[Any, ...]) -> None:
        _check_outs(info, options, out_avals[len(in_out) :], batched_ranks)
        wrapped_outs.append(out_avals[len(in_out) :])

    def scalars(args: Sequence[Any], given: Mapping[str, Any]) -> dict[str, Any]:
        del args
        return dict(info.scalar_values(dict(given)))

    def check_call(args: Sequence[Any], values: Mapping[str, Any]) -> None:
        del values
        (out_avals,) = wrapped_outs
        dtypes = [np.dtype(x.dtype).name for x in args] + [
            np.dtype(a.dtype).name for a in out_avals
        ]
        shapes = [np.shape(x) for x in args] + [tuple(a.shape) for a in out_avals]
        info.check_call(dtypes, None if batched_ranks else shapes, len(args))

    return kernel_op(
        info,
        outs,
        dtypes=DTYPES,
        launch=_Launch(options.launch, False, in_out, options.block_dim, options.boundscheck),
        vmap_method=options.vmap_method,
        input_output_aliases=input_output_aliases,
        sharding_rule=options.sharding_rule,
        scalars=scalars,
        check_outs=check_outs,
        check_call=check_call,
        derivative=_call,
    )


def _wrap_in_out(
    info: KernelInfo,
    outs: Any,
    options: _Options,
    input_output_aliases: dict[int, int] | None,
    in_out_argnames: Any,
) -> Callable[..., Any]:
    """The op of a kernel with in-out parameters: it returns their new values
    (aliased to the inputs), then the outputs of ``outs``. One kernel_op per
    shape of the in-out arrays, made on its first call."""
    if input_output_aliases is not None:
        raise ValueError(
            "`input_output_aliases` cannot be combined with `in_out_argnames`; declare each "
            "array the kernel updates in place as an in-out parameter"
        )
    spread = isinstance(outs, Sequence) and not ffi_core.bridge.is_output_spec(outs)
    if spread and len(outs) == 0:  # every output is an in-out array
        out_avals: tuple[Any, ...] = ()
        rebuild: Callable[[Sequence[Any]], Any] = tuple
    else:
        out_avals, rebuild = ffi_core.bridge.output_avals(outs, accepted=DTYPES)
    in_out = check_in_out(info, in_out_argnames, len(out_avals))
    _check_outs(info, options, out_avals, options.vmap_method in ("expand_dims", "broadcast_all"))
    structs = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in out_avals)
    ops: dict[tuple[Any, ...], Callable[..., Any]] = {}

    def aval(args: Sequence[Any], k: int) -> Any:
        # The output an in-out input makes; where the input cannot be one,
        # a stand-in of the declared rank, so the call's checks name what is wrong.
        x: Any = args[k] if k < len(args) else None
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            name = np.dtype(x.dtype).name
            if name in DTYPES.names:
                return jax.ShapeDtypeStruct(tuple(np.shape(x)), name)
        p = info.arrays[k]
        return jax.ShapeDtypeStruct((0,) * p.rank, p.dtype or "float32")

    n_in = len(info.arrays) - len(out_avals)

    def op(*args: Any, **given: Any) -> tuple[Any, ...]:
        if len(args) != n_in:
            inputs = ", ".join(p.name for p in info.arrays[:n_in])
            updated = ", ".join(f"'{info.arrays[k].name}'" for k in in_out)
            raise TypeError(
                f"warp kernel '{info.name}' takes {n_in} input arrays ({inputs}; {updated} "
                f"read and written, from `in_out_argnames`){info.scalars_as_keywords()}, but "
                f"is called with {len(args)} positional arguments"
            )
        key = tuple(aval(args, k) for k in in_out)
        inner = ops.get(key)
        if inner is None:
            aliases = {k: m for m, k in enumerate(in_out)}
            inner = ops[key] = _wrap(info, (*key, *structs), options, aliases, in_out)
        results = inner(*args, **given)
        rest = rebuild(results[len(in_out) :])
        return (*results[: len(in_out)], *(rest if spread else (rest,)))

    op.__name__ = info.name
    op.__qualname__ = info.name
    op.__doc__ = f"{info.label} as a JAX operation."
    return op
