"""Concurrent calls from Python threads, and several CPU devices."""

from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from numba_cpu_ffi import numba_kernel

S = jax.ShapeDtypeStruct
N = 256


@numba.njit
def affine(x, out):
    for i in range(x.shape[0]):
        out[i] = 3 * x[i] + 1


@numba.njit(parallel=True)
def parallel_affine(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = 3 * x[i] + 1


@numba.njit
def flat_affine(x, out):
    xf, of = x.ravel(), out.ravel()
    for i in range(xf.size):
        of[i] = 3 * xf[i] + 1


@pytest.mark.parametrize("kernel", [affine, parallel_affine], ids=["serial", "parallel"])
@pytest.mark.parametrize("vmap", [False, True], ids=["plain", "vmap"])
def test_threads(kernel, vmap):
    f = numba_kernel(kernel, S((N,), jnp.float32))
    shape = (3, N) if vmap else (N,)
    f = jax.jit(jax.vmap(f) if vmap else f)
    base = jnp.arange(np.prod(shape), dtype=jnp.float32).reshape(shape)
    f(base).block_until_ready()

    def work(k):
        x = base + k
        expected = np.asarray(3 * x + 1)
        return all(np.array_equal(np.asarray(f(x)), expected) for _ in range(50))

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(8)))


def test_devices():
    assert jax.device_count() >= 4, "conftest.py asks XLA for 4 CPU devices"


@pytest.mark.parametrize("kernel", [affine, parallel_affine], ids=["serial", "parallel"])
def test_pmap(kernel):
    x = jnp.arange(4 * N, dtype=jnp.float32).reshape(4, N)
    f = jax.pmap(numba_kernel(kernel, S((N,), jnp.float32)))
    np.testing.assert_array_equal(f(x), 3 * x + 1)


def test_pmap_of_vmap():
    x = jnp.arange(4 * 3 * N, dtype=jnp.float32).reshape(4, 3, N)
    f = jax.pmap(jax.vmap(numba_kernel(affine, S((N,), jnp.float32))))
    np.testing.assert_array_equal(f(x), 3 * x + 1)


@pytest.mark.parametrize("spec", [P("i"), P(None, "i"), P()], ids=str)
def test_shard_map(spec):
    mesh = Mesh(np.array(jax.devices()[:4]), ("i",))
    x = jnp.arange(8 * 16, dtype=jnp.float32).reshape(8, 16)

    def per_shard(block):
        return numba_kernel(flat_affine, S(block.shape, block.dtype))(block)

    f = jax.jit(jax.shard_map(per_shard, mesh=mesh, in_specs=spec, out_specs=spec))
    out = f(x)
    np.testing.assert_array_equal(out, 3 * x + 1)
    assert len(out.sharding.device_set) == 4
