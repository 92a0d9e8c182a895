"""``triton_kernel``: one ``@triton.jit`` kernel as a JAX GPU operation.

The kernel's parameters that are not ``tl.constexpr`` are, in order, one
pointer per input, one per output, then scalars. Constexprs are fixed when the
kernel is wrapped; scalars are static keywords of each call and travel as the
FFI call's attributes, so every value shares one compiled kernel and handler.
At lowering, the kernel is compiled for each local GPU's architecture (once
per signature, cached) and launched by ffi-core's native CUDA launcher.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ffi_core.bridge import KernelDTypes, KernelInfo, derivative_fix, kernel_op, normalize_outs

from ._compile import DTYPES, constexpr_mismatch
from ._digest import kernel_digest
from ._planner import _grid, _PlannedLaunch, _scalar_dtype

__all__ = ["SUPPORTED_DTYPES", "triton_kernel"]

#: The array dtypes a Triton kernel's pointers may point to.
SUPPORTED_DTYPES = tuple(DTYPES)
#: The dtype table: what the checks accept and how their messages name the kernels.
_DTYPES = KernelDTypes(SUPPORTED_DTYPES, "Triton kernels")
# What the refusal to differentiate a kernel says to do: a kernel of an
# XLACustomKernel takes its derivative from there.
_DERIVATIVE_FIX = derivative_fix(
    "`XLACustomKernel.def_jvp_rule` (and `def_transpose_rule` for reverse mode)"
)


def triton_kernel(
    kernel: Any,
    outs: Any,
    *,
    grid: int | tuple[int, ...] | Callable[[dict[str, Any]], Any],
    num_warps: int = 4,
    num_stages: int = 3,
    input_output_aliases: dict[int, int] | None = None,
    vmap_method: str | None = None,
    sharding_rule: Any = None,
    **constexprs: Any,
) -> Callable[..., Any]:
    """Wrap a ``@triton.jit`` kernel as a JAX GPU operation.

    Args:
        kernel: a ``@triton.jit`` function whose parameters that are not
            ``tl.constexpr`` are one pointer per input, one per output, then
            scalars.
        outs: a ``jax.ShapeDtypeStruct``, a sequence or a pytree of them; the
            call returns one array, a tuple or the same pytree.
        grid: programs per axis: an int, a tuple of up to 3 ints, or a callable
            of the meta-parameters (the constexprs and the call's scalars, a
            dict) returning one, as in Triton.
        num_warps, num_stages: Triton's compile options; the block is
            ``32 * num_warps`` threads.
        input_output_aliases: ``{input index: output index}``; the output
            reuses the input's buffer.
        vmap_method: None (one native call launching once per batch element),
            ``"sequential"`` / ``"sequential_unrolled"`` (an XLA loop), or
            ``"expand_dims"`` / ``"broadcast_all"`` (the kernel sees the batch
            as a leading axis).
        sharding_rule: how the kernel runs on shards under a sharded ``jit``
            (``"elementwise"``, Shardy's einsum-like notation such as
            ``"i j, j -> i"``, or an ``ffi_core.ShardingRule``): each device
            launches it on its shard, with scalars given as callables of the
            input shapes evaluated on the shard's (a size given as a plain
            number would stay the whole array's) and the grid computed from
            them. None (default): XLA gathers sharded inputs and every device
            computes the whole result.
        **constexprs: the value of each ``tl.constexpr`` parameter (those with
            a default may be left out).

    Returns:
        ``op(*inputs, **scalars)``: the kernel's scalar parameters are static
        keywords of each call; each may be a callable of the tuple of input
        shapes (``n=lambda shapes: shapes[0][0]``).

    Limitations:
        No derivative (``jax.grad`` and the other transforms name the kernel
        and the fix: ``XLACustomKernel.def_jvp_rule``, or ``jax.custom_vjp``).
        Kernels that need Triton's global or profile scratch memory (tensor
        descriptors) are refused, as are machines whose GPUs compile the
        kernel to different block or shared-memory sizes.

    Example (on a GPU):
        >>> add_op = triton_kernel(
        ...     add, jax.ShapeDtypeStruct((n,), jnp.float32),
        ...     grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),), BLOCK=1024,
        ... )  # doctest: +SKIP
        >>> jax.jit(lambda x, y: add_op(x, y, n=n))(x, y)  # doctest: +SKIP
    """
    from ._compile import _import_triton

    triton = _import_triton()
    if not isinstance(kernel, triton.JITFunction):
        raise TypeError(
            f"`kernel` must be a @triton.jit function (triton.JITFunction), "
            f"got {type(kernel).__name__}"
        )
    name = kernel.fn.__name__
    label = f"triton kernel '{name}'"
    params = list(kernel.params)
    constexpr_names = [p.name for p in params if p.is_constexpr]
    unknown, missing = constexpr_mismatch(params, constexprs)
    if unknown:
        raise TypeError(
            f"{label}: {unknown[0]!r} is not a tl.constexpr parameter of the kernel; its "
            f"tl.constexpr parameters are {constexpr_names}"
        )
    if missing:
        raise TypeError(
            f"{label}: missing the value of tl.constexpr parameter(s) {missing}; pass them "
            f"as keywords of triton_kernel, e.g. {missing[0]}=..."
        )
    for what, value in (("num_warps", num_warps), ("num_stages", num_stages)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{label}: `{what}` must be an int, got {value!r}")
        if value < 1:
            raise ValueError(f"{label}: `{what}` must be at least 1, got {value}")
    if num_warps & (num_warps - 1) or num_warps > 32:
        raise ValueError(
            f"{label}: `num_warps` must be a power of two from 1 to 32 (a block of "
            f"32 * num_warps threads, at most 1024), got {num_warps}"
        )
    if not callable(grid):
        _grid(grid, {}, label)  # a wrong type fails here, before any call
    runtime = tuple(p.name for p in params if not p.is_constexpr)
    try:
        consts = tuple(sorted(constexprs.items()))
        hash(consts)
    except TypeError:
        raise TypeError(f"{label}: constexpr values must be hashable") from None
    info = KernelInfo(
        name=name,
        label=label,
        qualname=f"{kernel.fn.__module__}.{kernel.fn.__qualname__}",
        digest=kernel_digest(kernel, label),
        derivative_fix=_DERIVATIVE_FIX,
    )
    # The outputs' pointers follow the inputs'; the scalars follow both.
    n_out = len(normalize_outs(outs)[0])

    def arity(n_in: int, n_out: int) -> None:
        n_ptr = n_in + n_out
        if n_ptr > len(runtime):
            raise TypeError(
                f"{label} takes {len(runtime)} parameters that are not tl.constexpr "
                f"({', '.join(runtime)}), but got {n_in} inputs and {n_out} outputs, "
                f"{n_ptr} pointers"
            )

    def scalars(args: Sequence[Any], given: Mapping[str, Any]) -> Mapping[str, Any]:
        n_ptr = len(args) + n_out
        scalar_names = runtime[n_ptr:]
        unknown = sorted(set(given) - set(scalar_names))
        if unknown:
            raise TypeError(
                f"{label}: unexpected keyword(s) {unknown}; its scalar parameters (after "
                f"{n_ptr} pointers) are {list(scalar_names)}"
            )
        absent = [s for s in scalar_names if s not in given]
        if absent:
            raise TypeError(
                f"{label}: missing scalar parameter(s) {absent}; pass them as keywords of the "
                f"call, e.g. op(..., {absent[0]}=...) (the parameters after the first "
                f"{n_ptr} are scalars: {len(args)} input arrays given and {n_out} outputs; "
                "a pointer among them means an input array is missing)"
            )
        return given

    def check_call(args: Sequence[Any], values: Mapping[str, Any]) -> None:
        for s in runtime[len(args) + n_out :]:
            _scalar_dtype(s, values[s], label)

    launch = _PlannedLaunch(kernel, consts, num_warps, num_stages, runtime, grid)
    return kernel_op(
        info,
        outs,
        # Triton's part: its dtypes, launch and checks of a call.
        dtypes=_DTYPES,
        launch=launch,
        arity=arity,
        scalars=scalars,
        check_call=check_call,
        # The user's options, checked by the kit.
        vmap_method=vmap_method,
        input_output_aliases=input_output_aliases,
        sharding_rule=sharding_rule,
    )
