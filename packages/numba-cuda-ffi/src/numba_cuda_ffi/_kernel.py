"""``numba_cuda_kernel``: one ``@cuda.jit`` kernel as a JAX operation."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ffi_core import bridge
from ffi_core.bridge import BridgeCatalog, KernelCall, Launch, kernel_op

from ._launch import LaunchConfig, launch_config
from ._runtime import cuda_devices
from ._spec import DTYPES, VMAP_METHODS, KernelInfo

__all__ = ["numba_cuda_kernel"]


# Made once per kernel object; numba-cuda kernels are not exported, so the
# catalog registers no rebuilder.
_catalog = BridgeCatalog(
    KernelInfo,
    kernel_type=(),
    language="numba cuda kernel",
    wrapper="numba_cuda_kernel",
    passed="the @numba.cuda.jit kernel",
)


def cuda_kernel_op(
    info: bridge.KernelInfo, outs: Any, *, launch: Launch, **options: Any
) -> Callable[..., Any]:
    """``ffi_core.bridge.kernel_op`` with numba-cuda's part of every operation
    (kernel or callable): its dtype table, and a GPU checked at each call.
    ``options`` are ``kernel_op``'s others: the bridge's and the user's."""
    return kernel_op(
        info,
        outs,
        dtypes=DTYPES,
        launch=launch,
        check_call=lambda args, scalars: cuda_devices(info.label),
        **options,
    )


@dataclasses.dataclass(frozen=True)
class _Launch:
    """What to bind for a call: ``numba_cuda_call_p`` with the launch the
    kernel was wrapped with."""

    config: LaunchConfig

    def __call__(self, call: KernelCall, out_avals: Any, args: Any, scalars: Any) -> bridge.Bind:
        from ._primitive import numba_cuda_call_p

        del out_avals, args, scalars  # a numba CUDA kernel takes arrays only
        return bridge.Bind(
            numba_cuda_call_p,
            (
                ("info", call.info),
                ("aliases", call.aliases),
                ("vmap_method", call.vmap_method),
                ("batched", None),
                ("launch", self.config),
            ),
        )


def numba_cuda_kernel(
    kernel: Any,
    outs: Any,
    *,
    grid: int | tuple[int, ...] | None = None,
    block: int | tuple[int, ...] | None = None,
    launch_dims: int | tuple[int, ...] | None = None,
    threads_per_block: int = 256,
    shared_mem: int = 0,
    vmap_method: str | None = None,
    input_output_aliases: dict[int, int] | None = None,
    sharding_rule: Any = None,
) -> Callable[..., Any]:
    """Wrap a ``@numba.cuda.jit`` kernel as a JAX GPU operation.

    The kernel follows ``kernel(in_1, ..., in_n, out_1, ..., out_m)``: it reads
    the inputs and writes every output in place. At lowering time it is compiled
    for the dtypes and ranks it gets and loaded into each GPU's context; XLA then
    calls a native handler that launches it on XLA's stream with
    ``cuLaunchKernel``: no Python per call, and XLA may capture the launch into
    a CUDA graph. Sizes are read at run time; the launch is fixed here.

    Args:
        kernel: a ``@numba.cuda.jit`` kernel (not a device function).
        outs: a ``jax.ShapeDtypeStruct``, a sequence or a pytree of them; the call
            returns one array, a tuple or the same pytree. The kernel takes the
            outputs in the pytree's order: a dict's in sorted key order.
        grid, block: blocks per grid and threads per block, each an int or a
            tuple of up to 3 ints (x, y, z). Give both, or ``launch_dims``.
        launch_dims: total threads per axis (1 to 3 axes); the grid covers them
            with blocks of ``threads_per_block`` threads (1-d) or 256-thread tiles
            (2-d: 32 x 8, 3-d: 16 x 4 x 4). The kernel must check bounds.
        threads_per_block: block size for 1-d ``launch_dims``.
        shared_mem: dynamic shared memory per block, in bytes.
        vmap_method: None (default): one native call that launches the kernel
            once per batch element. ``"sequential"`` / ``"sequential_unrolled"``:
            an XLA loop of calls. ``"fold"``: declare the kernel row-independent
            along axis 0 (launch axis x maps to axis 0 of every array); the batch
            is folded into axis 0 and launch axis x scaled by the batch size.
            ``"expand_dims"`` / ``"broadcast_all"`` (as ``jax.ffi.ffi_call``):
            the kernel gets each array with the batch as a leading axis
            (unbatched inputs with an axis of 1, or broadcast to the batch) and
            handles it itself; the launch is the one given.
        input_output_aliases: ``{input index: output index}``; the output reuses
            the input's buffer (same shape and dtype).
        sharding_rule: how the kernel runs on shards under a sharded ``jit``
            (``"elementwise"``, Shardy's einsum-like notation such as
            ``"i j, j -> i"``, or an ``ffi_core.ShardingRule``): each device
            launches it on its local shard, with
            the launch given here (it covers the whole arrays, so each shard;
            the kernel checks bounds). None (default): XLA gathers sharded
            inputs and every device computes the whole result.

    Returns:
        A function taking the input arrays and returning the outputs.

    Limitations:
        No derivative (``jax.grad`` and the other transforms name the kernel
        and the fix: ``XLACustomKernel.def_jvp_rule``, or ``jax.custom_vjp``).
        Not loaded: kernels linking external code (``link=``; launch them
        from ``numba_cuda_callable``) and cooperative launches. NVIDIA GPUs
        only: a call placed on the CPU is a RuntimeError.

    Example (on a GPU):
        >>> from numba import cuda
        >>> @cuda.jit
        ... def add(x, y, out):
        ...     i = cuda.grid(1)
        ...     if i < out.size:
        ...         out[i] = x[i] + y[i]
        >>> n = 1000
        >>> add_op = numba_cuda_kernel(
        ...     add, jax.ShapeDtypeStruct((n,), jnp.float32), launch_dims=n
        ... )  # doctest: +SKIP
        >>> jax.jit(add_op)(x, y)  # doctest: +SKIP
    """
    info = _catalog.info(kernel)
    launch = launch_config(
        grid=grid, block=block, launch_dims=launch_dims,
        threads_per_block=threads_per_block, shared_mem=shared_mem,
    )  # fmt: skip
    return cuda_kernel_op(
        info,
        outs,
        # The kernel's part: its vmap methods, the launch.
        vmap_methods=VMAP_METHODS,
        launch=_Launch(launch),
        # The user's options, checked by the kit.
        vmap_method=vmap_method,
        input_output_aliases=input_output_aliases,
        sharding_rule=sharding_rule,
    )
