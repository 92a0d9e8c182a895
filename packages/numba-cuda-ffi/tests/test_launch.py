"""Launch configuration: the arithmetic, and every refusal of a bad launch."""

import pytest
from ffi_core.testing import whole_message
from numba_cuda_ffi import LaunchConfig, launch_config


@pytest.mark.parametrize(
    ("dims", "tpb", "grid", "block"),
    [
        (1000, 256, (4, 1, 1), (256, 1, 1)),
        ((1000,), 128, (8, 1, 1), (128, 1, 1)),
        (1, 256, (1, 1, 1), (1, 1, 1)),
        (3, 256, (1, 1, 1), (4, 1, 1)),
        (256, 256, (1, 1, 1), (256, 1, 1)),
        (257, 256, (2, 1, 1), (256, 1, 1)),
        (2**31 - 1, 1024, (2**21, 1, 1), (1024, 1, 1)),
        ((100, 3), 256, (4, 1, 1), (32, 4, 1)),
        ((64, 64), 256, (2, 8, 1), (32, 8, 1)),
        ((5, 7), 256, (1, 1, 1), (8, 8, 1)),
        ((10, 10, 10), 256, (1, 3, 3), (16, 4, 4)),
        ((1, 1, 1), 256, (1, 1, 1), (1, 1, 1)),
    ],
)
def test_launch_dims(dims, tpb, grid, block):
    config = launch_config(launch_dims=dims, threads_per_block=tpb)
    assert (config.grid, config.block) == (grid, block)
    n = (dims,) if isinstance(dims, int) else dims
    for axis, d in enumerate(n):  # every requested thread exists
        assert config.grid[axis] * config.block[axis] >= d
        assert (config.grid[axis] - 1) * config.block[axis] < d
    assert config.block[0] * config.block[1] * config.block[2] <= 1024


@pytest.mark.parametrize(
    ("grid", "block", "padded"),
    [
        (4, 256, ((4, 1, 1), (256, 1, 1))),
        ((4, 2), (16, 16), ((4, 2, 1), (16, 16, 1))),
        ((1, 2, 3), (4, 4, 4), ((1, 2, 3), (4, 4, 4))),
        ([2**31 - 1, 65535, 65535], [1024], ((2**31 - 1, 65535, 65535), (1024, 1, 1))),
        ((1,), (1, 1, 64), ((1, 1, 1), (1, 1, 64))),
    ],
)
def test_grid_block(grid, block, padded):
    config = launch_config(grid=grid, block=block, shared_mem=1024)
    assert (config.grid, config.block, config.shared_mem) == (*padded, 1024)
    assert config.launch_dims is None


def test_folded_scales_axis_x():
    assert launch_config(launch_dims=(100, 3)).folded(5) == launch_config(launch_dims=(500, 3))
    config = launch_config(grid=(3, 2), block=(64,)).folded(4)
    assert config == LaunchConfig((12, 2, 1), (64, 1, 1), 0)
    with pytest.raises(
        ValueError,
        match=whole_message(f"`grid` has {2**32 - 2} blocks on axis x; the limit is {2**31 - 1}"),
    ):
        launch_config(grid=2**31 - 1, block=1).folded(2)


NEITHER = "give either `grid` and `block`, or `launch_dims` (total threads per axis); got none"
BOTH = "give either `grid` and `block`, or `launch_dims` (total threads per axis); got both"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({}, ValueError, NEITHER),
        ({"grid": 1, "block": 1, "launch_dims": 1}, ValueError, BOTH),
        ({"grid": 1, "launch_dims": 1}, ValueError, BOTH),
        ({"block": 1, "launch_dims": 1}, ValueError, BOTH),
        ({"grid": 4}, ValueError, "`grid` needs `block` too: give both, or `launch_dims` instead"),
        ({"block": 4}, ValueError, "`block` needs `grid` too: give both, or `launch_dims` instead"),
        ({"launch_dims": 0}, ValueError, "`launch_dims` axis x must be positive, got 0"),
        ({"launch_dims": (4, -1)}, ValueError, "`launch_dims` axis y must be positive, got -1"),
        ({"grid": (1, 1, 0), "block": 1}, ValueError, "`grid` axis z must be positive, got 0"),
        ({"grid": 1, "block": -32}, ValueError, "`block` axis x must be positive, got -32"),
        (
            {"launch_dims": (1, 2, 3, 4)},
            ValueError,
            "`launch_dims` must have 1 to 3 axes (x, y, z), got 4: (1, 2, 3, 4)",
        ),
        (
            {"launch_dims": ()},
            ValueError,
            "`launch_dims` must have 1 to 3 axes (x, y, z), got 0: ()",
        ),
        (
            {"grid": (1, 1, 1, 1), "block": 1},
            ValueError,
            "`grid` must have 1 to 3 axes (x, y, z), got 4: (1, 1, 1, 1)",
        ),
        (
            {"launch_dims": 1.5},
            TypeError,
            "`launch_dims` must be an int or a tuple of 1 to 3 ints, got <class 'float'>",
        ),
        (
            {"grid": "8", "block": 1},
            TypeError,
            "`grid` must be an int or a tuple of 1 to 3 ints, got <class 'str'>",
        ),
        ({"launch_dims": (4, 2.0)}, TypeError, "`launch_dims` axis y must be an int, got 2.0"),
        ({"launch_dims": True}, TypeError, "`launch_dims` axis x must be an int, got True"),
        (
            {"grid": 1, "block": 1025},
            ValueError,
            "`block` axis x is 1025 threads; the limit is 1024",
        ),
        (
            {"grid": 1, "block": (1, 1, 65)},
            ValueError,
            "`block` axis z is 65 threads; the limit is 64",
        ),
        (
            {"grid": 1, "block": (32, 32, 2)},
            ValueError,
            "`block` (32, 32, 2) has 2048 threads; the limit is 1024 per block",
        ),
        (
            {"grid": (1, 65536), "block": 1},
            ValueError,
            "`grid` has 65536 blocks on axis y; the limit is 65535",
        ),
        (
            {"grid": 2**31, "block": 1},
            ValueError,
            f"`grid` has {2**31} blocks on axis x; the limit is {2**31 - 1}",
        ),
        (
            {"launch_dims": (1, 65535 * 8 + 1)},
            ValueError,
            f"`launch_dims` (1, {65535 * 8 + 1}) needs 65536 blocks on axis y; the limit is 65535",
        ),
        (
            {"launch_dims": 8, "threads_per_block": 0},
            ValueError,
            "`threads_per_block` must be 1 to 1024, got 0",
        ),
        (
            {"launch_dims": 8, "threads_per_block": 2048},
            ValueError,
            "`threads_per_block` must be 1 to 1024, got 2048",
        ),
        (
            {"launch_dims": 8, "threads_per_block": "256"},
            TypeError,
            "`threads_per_block` must be an int, got '256'",
        ),
        (
            {"launch_dims": 8, "shared_mem": -1},
            ValueError,
            "`shared_mem` must be 0 to 232448 bytes (227 KiB), got -1",
        ),
        (
            {"launch_dims": 8, "shared_mem": 232449},
            ValueError,
            "`shared_mem` must be 0 to 232448 bytes (227 KiB), got 232449",
        ),
        (
            {"launch_dims": 8, "shared_mem": None},
            TypeError,
            "`shared_mem` must be an int, got None",
        ),
    ],
)
def test_refused(kwargs, error, message):
    with pytest.raises(error, match=whole_message(message)):
        launch_config(**kwargs)
