"""Launch configuration: grid and block sizes, their validation and arithmetic.

A launch is described either by ``grid`` and ``block`` directly, or by
``launch_dims``, the total number of threads wanted per axis, from which a
grid and block are derived. Everything here is plain integer arithmetic,
checked before anything is traced.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence
from typing import Any

__all__ = [
    "MAX_BLOCK",
    "MAX_GRID",
    "MAX_SHARED_MEM",
    "MAX_THREADS_PER_BLOCK",
    "STATIC_SHARED_MEM",
    "LaunchConfig",
    "launch_config",
]

#: Largest block per axis (x, y, z) and threads per block, on every CUDA GPU.
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
#: Largest grid per axis (x, y, z).
MAX_GRID = (2**31 - 1, 65535, 65535)
#: Dynamic shared memory a kernel gets without opting in (48 KiB).
STATIC_SHARED_MEM = 48 * 1024
#: Largest dynamic shared memory per block of any current GPU (227 KiB, sm_90
#: and sm_100); above 48 KiB the module is opted in when it is loaded, and a
#: device with less refuses the load.
MAX_SHARED_MEM = 227 * 1024

# Block tiles for launch_dims of 2 and 3 axes: 256 threads, x the longest.
_TILES = {1: None, 2: (32, 8), 3: (16, 4, 4)}
_AXES = "xyz"


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """A validated launch: grid and block as (x, y, z), dynamic shared memory
    in bytes, and the ``launch_dims`` it was derived from (None when ``grid``
    and ``block`` were given)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0
    launch_dims: tuple[int, ...] | None = None
    threads_per_block: int = 256

    def folded(self, batch: int) -> LaunchConfig:
        """The launch over ``batch`` row-independent elements folded into axis x."""
        if self.launch_dims is not None:
            dims = (self.launch_dims[0] * batch, *self.launch_dims[1:])
            return launch_config(
                launch_dims=dims,
                threads_per_block=self.threads_per_block,
                shared_mem=self.shared_mem,
            )
        grid = (self.grid[0] * batch, *self.grid[1:])
        return launch_config(grid=grid, block=self.block, shared_mem=self.shared_mem)


def _as_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {value!r}") from None


def _dims(value: Any, name: str) -> tuple[int, ...]:
    """``value`` (an int or a sequence of 1 to 3 ints) as a tuple of positive ints."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        items = tuple(value)
    elif (isinstance(value, int) and not isinstance(value, bool)) or hasattr(value, "__index__"):
        items = (value,)
    else:
        raise TypeError(f"`{name}` must be an int or a tuple of 1 to 3 ints, got {type(value)!r}")
    if not 1 <= len(items) <= 3:
        raise ValueError(
            f"`{name}` must have 1 to 3 axes (x, y, z), got {len(items)}: {tuple(items)!r}"
        )
    dims = tuple(_as_int(v, f"`{name}` axis {_AXES[i]}") for i, v in enumerate(items))
    for i, d in enumerate(dims):
        if d <= 0:
            raise ValueError(f"`{name}` axis {_AXES[i]} must be positive, got {d}")
    return dims


def _pad(dims: tuple[int, ...]) -> tuple[int, int, int]:
    return (*dims, *(1,) * (3 - len(dims)))  # type: ignore[return-value]


def _check_grid(grid: tuple[int, int, int], what: str) -> None:
    for i, (g, limit) in enumerate(zip(grid, MAX_GRID, strict=True)):
        if g > limit:
            raise ValueError(f"{what} {g} blocks on axis {_AXES[i]}; the limit is {limit}")


def _check_block(block: tuple[int, int, int]) -> None:
    for i, (b, limit) in enumerate(zip(block, MAX_BLOCK, strict=True)):
        if b > limit:
            raise ValueError(f"`block` axis {_AXES[i]} is {b} threads; the limit is {limit}")
    total = block[0] * block[1] * block[2]
    if total > MAX_THREADS_PER_BLOCK:
        raise ValueError(
            f"`block` {block} has {total} threads; the limit is {MAX_THREADS_PER_BLOCK} per block"
        )


def _next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _tile(dims: tuple[int, ...], threads_per_block: int) -> tuple[int, ...]:
    """Block sizes for ``dims`` total threads: ``threads_per_block`` on one
    axis; a fixed 256-thread tile on 2 or 3, each side shrunk to the next power
    of two above a short axis, so a thin launch does not idle most threads."""
    tile = _TILES[len(dims)]
    if tile is None:
        return (min(threads_per_block, _next_pow2(dims[0])),)
    return tuple(min(t, _next_pow2(d)) for t, d in zip(tile, dims, strict=True))


def launch_config(
    *,
    grid: Any = None,
    block: Any = None,
    launch_dims: Any = None,
    threads_per_block: Any = 256,
    shared_mem: Any = 0,
) -> LaunchConfig:
    """Validate a launch given as ``grid`` and ``block`` or as ``launch_dims``.

    Example:
        >>> launch_config(launch_dims=1000).grid
        (4, 1, 1)
        >>> launch_config(launch_dims=(100, 3)).block
        (32, 4, 1)
    """
    shared = _as_int(shared_mem, "`shared_mem`")
    if not 0 <= shared <= MAX_SHARED_MEM:
        raise ValueError(
            f"`shared_mem` must be 0 to {MAX_SHARED_MEM} bytes (227 KiB), got {shared}"
        )
    given = (grid is not None, block is not None, launch_dims is not None)
    if given == (False, False, False):
        raise ValueError(
            "give either `grid` and `block`, or `launch_dims` (total threads per axis); got none"
        )
    if given[2] and (given[0] or given[1]):
        raise ValueError(
            "give either `grid` and `block`, or `launch_dims` (total threads per axis); got both"
        )
    if given[0] != given[1]:
        missing, present = ("block", "grid") if given[0] else ("grid", "block")
        raise ValueError(f"`{present}` needs `{missing}` too: give both, or `launch_dims` instead")
    if launch_dims is None:
        g, b = _dims(grid, "grid"), _dims(block, "block")
        config_grid, config_block = _pad(g), _pad(b)
        _check_block(config_block)
        _check_grid(config_grid, "`grid` has")
        return LaunchConfig(config_grid, config_block, shared)
    tpb = _as_int(threads_per_block, "`threads_per_block`")
    if not 1 <= tpb <= MAX_THREADS_PER_BLOCK:
        raise ValueError(f"`threads_per_block` must be 1 to {MAX_THREADS_PER_BLOCK}, got {tpb}")
    dims = _dims(launch_dims, "launch_dims")
    tile = _tile(dims, tpb)
    blocks = tuple(-(-d // t) for d, t in zip(dims, tile, strict=True))
    config_grid = _pad(blocks)
    _check_grid(config_grid, f"`launch_dims` {dims} needs")
    return LaunchConfig(config_grid, _pad(tile), shared, dims, tpb)
