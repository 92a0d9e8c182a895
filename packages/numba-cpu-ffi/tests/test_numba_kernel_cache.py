"""Caches, counted: one FFI target per signature, and handlers reloaded from
disk by a later process."""

import os
import subprocess
import sys
import textwrap

import ffi_core
import ffi_core.bridge
import jax
import jax.numpy as jnp
import numba
import numpy as np
from numba_cpu_ffi import cache_dir, numba_kernel, parallel_min_elements

S = jax.ShapeDtypeStruct


@numba.njit
def registration_probe(x, out):
    xf, of = x.ravel(), out.ravel()
    for i in range(xf.size):
        of[i] = xf[i] - 1


def _targets(name):
    return {
        key
        for key in ffi_core.bridge.registered_targets()
        if key[0].startswith(f"numba_cpu.{name}_")
    }


def test_one_target_per_signature():
    before = _targets("registration_probe")
    assert before == set()
    for shape in [(3,), (5,), (0,), (7,)]:
        x = jnp.ones(shape, jnp.float32)
        f = numba_kernel(registration_probe, S(shape, jnp.float32))
        np.testing.assert_array_equal(f(x), x - 1)
        np.testing.assert_array_equal(jax.jit(f)(x), x - 1)
    rank_1 = _targets("registration_probe")
    assert len(rank_1) == 1
    assert rank_1 == {(next(iter(rank_1))[0], "cpu")}

    for shape in [(2, 3), (4, 1)]:
        x = jnp.ones(shape, jnp.float32)
        numba_kernel(registration_probe, S(shape, jnp.float32))(x)
    rank_2 = _targets("registration_probe")
    assert len(rank_2) == 2 and rank_1 < rank_2

    x = jnp.ones((2, 3), jnp.int32)
    numba_kernel(registration_probe, S((2, 3), jnp.int32))(x)
    assert len(_targets("registration_probe")) == 3


def test_cache_dir_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CPU_FFI_CACHE_DIR", str(tmp_path / "handlers"))
    assert cache_dir() == tmp_path / "handlers"
    assert cache_dir().is_dir()
    monkeypatch.setenv("NUMBA_CPU_FFI_CACHE_DIR", "")
    assert cache_dir() is None


# Runs a serial kernel, a parallel (prange) kernel on a small and on a large
# input (its serial and its parallel form) and three default vmaps, of a few
# rows (the handler's row loop), of many small rows (the kernel's batch loop)
# and of a few large rows (the call shape's loop of threads): the parallel
# code crashes a process that loads it from Numba's cache unless the
# threading layer is started first.
_SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numba, numpy as np
    from numba_cpu_ffi import numba_kernel

    @numba.njit
    def cached_serial(x, out):
        for i in range(x.shape[0]):
            out[i] = x[i] + 1

    @numba.njit(parallel=True)
    def cached_parallel(x, out):
        for i in numba.prange(x.shape[0]):
            out[i] = x[i] * 2

    x = jnp.arange(8.0, dtype=jnp.float32)
    s = jax.ShapeDtypeStruct(x.shape, x.dtype)
    np.testing.assert_array_equal(numba_kernel(cached_serial, s)(x), x + 1)
    np.testing.assert_array_equal(jax.jit(numba_kernel(cached_parallel, s))(x), x * 2)
    big = jnp.arange(2**20, dtype=jnp.float32)
    big_s = jax.ShapeDtypeStruct(big.shape, big.dtype)
    np.testing.assert_array_equal(jax.jit(numba_kernel(cached_parallel, big_s))(big), big * 2)
    rows = jnp.stack([x, x + 1, x + 2])
    np.testing.assert_array_equal(jax.vmap(numba_kernel(cached_serial, s))(rows), rows + 1)
    many = jnp.tile(x, (600, 1))
    np.testing.assert_array_equal(jax.vmap(numba_kernel(cached_serial, s))(many), many + 1)
    wide = jnp.tile(jnp.arange(2**18, dtype=jnp.float32), (4, 1))
    wide_s = jax.ShapeDtypeStruct((2**18,), jnp.float32)
    np.testing.assert_array_equal(jax.vmap(numba_kernel(cached_serial, wide_s))(wide), wide + 1)
    print("ok")
    """
)


def _files(root):
    return {
        (path.relative_to(root).as_posix(), path.stat().st_size, path.stat().st_mtime_ns)
        for path in root.rglob("*")
        if path.is_file()
    }


def _run(cache):
    env = dict(os.environ, NUMBA_CPU_FFI_CACHE_DIR=str(cache))
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", _SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr[-4000:]}"
    assert result.stdout.strip() == "ok"


def test_disk_cache_across_processes(tmp_path):
    _run(tmp_path)
    first = _files(tmp_path)
    names = {name for name, _, _ in first}
    # Numba's index and code of each kernel form: the serial kernel (its rows
    # in the vmap of a few rows too), its batch loop (the vmap of many rows),
    # the parallel kernel's serial form (the small call) and its parallel
    # form (the large one).
    kernels = {name for name in names if name.startswith("k_")}
    assert sum(name.endswith(".nbi") for name in kernels) == 4
    assert sum(name.endswith(".nbc") for name in kernels) == 4
    # One generated source per call shape, shared by the kernels of that shape
    # (serial and parallel kernels apart; with or without the cost hint of the
    # large call), and the index and code of each handler; the batched call
    # shape's loop of threads apart, built for the vmap of large rows only
    # (where threads pay: never with one thread).
    handlers = {name for name in names if name.startswith("s_")}
    assert sum(name.endswith(".py") for name in handlers) == 3
    assert sum(name.endswith(".nbi") for name in handlers) == 3
    assert sum(name.endswith(".nbc") for name in handlers) == 3
    loops = {name for name in names if name.startswith("t_")}
    threaded = 1 if parallel_min_elements() < 4 * 2**18 else 0
    assert sum(name.endswith(".nbi") for name in loops) == threaded
    assert sum(name.endswith(".nbc") for name in loops) == threaded
    # And the lock entries are saved under (empty).
    assert names == kernels | handlers | loops | {".lock"}
    _run(tmp_path)
    assert _files(tmp_path) == first, "the second process compiled instead of loading"
