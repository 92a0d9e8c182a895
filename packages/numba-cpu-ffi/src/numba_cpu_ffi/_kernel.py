"""``numba_kernel``: an ``@numba.njit`` kernel as a JAX operation."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ffi_core.bridge import Bind, KernelCall, bounds_checked, kernel_op
from ffi_core.bridge.cpu import cpu_call_bind

from ._catalog import kernel_info
from ._primitive import NumbaPlanner
from ._spec import DTYPES

__all__ = ["numba_kernel"]


@dataclasses.dataclass(frozen=True)
class _PlannedCall:
    """What a wrapped kernel's call binds: ``cpu_call_p`` with its planner.
    Equal for equal options, so eager calls hit JAX's cache."""

    context: str
    boundscheck: bool | None

    def __call__(self, call: KernelCall, out_avals: Any, args: Any, scalars: Any) -> Bind:
        del out_avals, args, scalars  # numba kernels take arrays only
        # Read at each bind: check_kernel's bounds_checking() block, or the process's switch.
        planner = NumbaPlanner(call.info, self.context, bounds_checked(self.boundscheck))
        return cpu_call_bind(planner, aliases=call.aliases, vmap_method=call.vmap_method)


def numba_kernel(
    kernel: Any,
    outs: Any,
    *,
    vmap_method: str | None = None,
    input_output_aliases: dict[int, int] | None = None,
    error_context: str | None = None,
    sharding_rule: Any = None,
    boundscheck: bool | None = None,
) -> Callable[..., Any]:
    """Wrap an ``@numba.njit`` kernel as a JAX operation.

    The kernel follows the convention ``kernel(in_1, ..., in_n, out_1, ...,
    out_m)``: it reads the inputs, writes every output in place and returns
    nothing. XLA calls a native handler generated for the kernel's dtypes and
    ranks: no Python and no GIL per call, and shapes are read at run time.

    Args:
        kernel: an ``@numba.njit`` function (``parallel=True`` with ``prange`` works).
        outs: the outputs, each as anything with ``shape`` and ``dtype`` (a
            ``jax.ShapeDtypeStruct``, a ``jax.core.ShapedArray``, an array): one,
            a sequence of them, or a pytree (dict, dataclass) of them. The call
            returns one array, a tuple or the same pytree respectively.
        vmap_method: how ``jax.vmap`` runs the kernel. None (default): one native
            call that loops over the batch (in threads when the batch holds
            enough work to pay for them; a batch of many small rows in the
            kernel's batch loop, the kernel inlined in a loop over the rows).
            ``"sequential"`` / ``"sequential_unrolled"``: one
            kernel call per batch element in an XLA loop. ``"expand_dims"`` /
            ``"broadcast_all"``: the kernel gets the batched arrays (inputs with a
            leading axis of size 1 or the batch size, outputs with the batch
            size) and must handle the extra axis.
        input_output_aliases: ``{input index: output index}``; the output reuses
            the input's buffer (and, under ``jit`` with donation, no copy is
            made). Shapes and dtypes must match.
        error_context: text added, in parentheses, to the messages of errors the
            kernel raises at run time (a library can say which operation and
            backend the kernel serves).
        sharding_rule: how the op runs on the shards of a sharded ``jit``
            (an ``ffi_core.ShardingRule`` or its string); None: XLA gathers
            the inputs and every device computes the whole result.
        boundscheck: compile the kernel with bounds checks: an index out of
            range raises ``IndexError`` naming the kernel instead of
            reading or writing past a buffer, at a cost in speed (measured
            in docs/performance.md). None (default): only inside
            ``check_kernel`` or when ``$FFI_CORE_BOUNDSCHECK=1``; False: never.

    Returns:
        A function taking the input arrays and returning the outputs.

    Limitations:
        No derivative: ``jax.grad``, ``jax.jvp``, ``jax.vjp`` and
        ``jax.linear_transpose`` raise NotImplementedError naming the kernel;
        define one with ``XLACustomKernel.def_jvp_rule`` or wrap the
        operation in ``jax.custom_vjp``/``jax.custom_jvp``.

    Example:
        >>> import jax, jax.numpy as jnp, numba
        >>> @numba.njit
        ... def add(x, y, out):
        ...     for i in range(x.size):
        ...         out[i] = x[i] + y[i]
        >>> x = jnp.arange(4.0, dtype=jnp.float32)
        >>> f = numba_kernel(add, jax.ShapeDtypeStruct(x.shape, x.dtype))
        >>> jax.jit(f)(x, x)
        Array([0., 2., 4., 6.], dtype=float32)
    """
    info = kernel_info(kernel)
    if error_context is not None and not isinstance(error_context, str):
        raise TypeError(f"`error_context` must be a str or None, got {type(error_context)!r}")
    if boundscheck is not None and not isinstance(boundscheck, bool):
        raise TypeError(f"`boundscheck` must be a bool or None, got {type(boundscheck)!r}")
    op = kernel_op(
        info,
        outs,
        dtypes=DTYPES,
        launch=_PlannedCall(error_context or "", boundscheck),
        vmap_method=vmap_method,
        input_output_aliases=input_output_aliases,
        sharding_rule=sharding_rule,
    )
    # Its readers (check_kernel's report, help()) see the op as this module's,
    # the public function's, rather than the kit's that built it.
    op.__module__ = __name__
    return op
