"""A Warp kernel's launch grid: the ``launch_dims`` a user gives, checked
against Warp's own limits, and the grid and bounds of one call."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._spec import MAX_DIMS, KernelInfo
from ._warp import wp_context

__all__ = ["bounds", "check_block_dim", "check_launch", "check_launch_dims", "launch_shape"]


def check_launch_dims(launch_dims: Any) -> Any:
    """``launch_dims`` checked when the kernel is wrapped: None, a callable,
    or dims (an int or a tuple of 1 to 4 non-negative ints) as a tuple."""
    if launch_dims is None or callable(launch_dims):
        return launch_dims
    return _dims(launch_dims, "`launch_dims`")


def _dims(value: Any, what: str) -> tuple[int, ...]:
    items = value if isinstance(value, tuple | list) else (value,)
    dims = []
    for d in items:
        if isinstance(d, bool):
            d = None
        try:
            dims.append(operator.index(d))
        except TypeError:
            raise TypeError(
                f"{what} must be an int, a tuple of 1 to {MAX_DIMS} ints, or a callable of "
                f"the input shapes returning one, got {value!r}"
            ) from None
    if not 1 <= len(dims) <= MAX_DIMS:
        raise ValueError(f"{what} must have 1 to {MAX_DIMS} dimensions, got {value!r}")
    if any(d < 0 for d in dims):
        raise ValueError(f"{what} must be non-negative, got {value!r}")
    return tuple(dims)


#: ``wp::launch_bounds_t`` holds each ``wp.tid()`` dimension as a uint32.
_BOUND_MAX = 2**32 - 1


def check_launch(info: KernelInfo, kernel: Any, shape: tuple[int, ...], block_dim: int) -> None:
    """Refuse a launch grid that Warp refuses for this kernel specialization
    (Warp's own check, with its reason: a kernel that uses ``wp.tid()`` gets
    signed 32-bit coordinates), and one whose ``wp.tid()`` dimensions do not
    fit Warp's launch bounds; folded dimensions have no such limit."""
    for axis, n in enumerate(shape[: kernel.adj.kernel_dim]):
        if n > _BOUND_MAX:
            raise ValueError(
                f"warp kernel '{info.name}' cannot be launched over the grid {shape}: dimension "
                f"{axis} is {n}, but Warp's launch bounds hold each wp.tid() dimension as a "
                f"32-bit unsigned int (at most {_BOUND_MAX})"
            )
    try:
        wp_context._build_kernel_launch_bounds(shape, kernel, block_dim)
    except ValueError as exc:
        raise ValueError(
            f"warp kernel '{info.name}' cannot be launched over the grid {shape}: {exc}"
        ) from None


def launch_shape(
    launch_dims: Any, in_shapes: Sequence[tuple[int, ...]], out_shapes: Sequence[tuple[int, ...]]
) -> tuple[int, ...]:
    """The launch grid of one (unbatched) call."""
    if launch_dims is None:
        return _dims(out_shapes[0], "the first output's shape (the default `launch_dims`)")
    if callable(launch_dims):
        return _dims(launch_dims(*in_shapes), "what `launch_dims` returned")
    return launch_dims


def bounds(shape: tuple[int, ...], kernel_dim: int) -> tuple[tuple[int, ...], int]:
    """``(shape, coord_mult)`` of Warp's launch bounds for a kernel whose
    ``wp.tid()`` has ``kernel_dim`` dimensions, as ``wp.launch`` builds them:
    missing trailing dimensions are 1, extra ones are folded into
    ``coord_mult`` (those threads share a coordinate)."""
    padded = shape + (1,) * max(0, kernel_dim - len(shape))
    mult = 1
    for d in padded[kernel_dim:]:
        mult *= d
    return padded[:kernel_dim], mult


def check_block_dim(block_dim: Any) -> int | None:
    """``warp_kernel``'s ``block_dim``: None (Warp's default) or threads per block."""
    if block_dim is None:
        return None
    if isinstance(block_dim, bool) or not isinstance(block_dim, int | np.integer):
        raise TypeError(f"`block_dim` must be an int or None, got {block_dim!r}")
    if not 1 <= block_dim <= _MAX_BLOCK_DIM:
        raise ValueError(
            f"`block_dim` must be in 1..{_MAX_BLOCK_DIM} (threads per block), got {block_dim!r}"
        )
    return int(block_dim)


#: CUDA's most threads per block, Warp's limit on the CPU too.
_MAX_BLOCK_DIM = 1024
