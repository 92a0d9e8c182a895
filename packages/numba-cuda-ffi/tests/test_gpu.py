"""On a GPU: kernels and callables under jit, vmap, scan, aliases, errors.

Skipped with a reason where numba-cuda sees no GPU; unchanged on a GPU machine.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numba import cuda
from numba_cuda_ffi import numba_cuda_callable, numba_cuda_kernel, temporary

pytestmark = pytest.mark.skipif(
    not cuda.is_available(), reason="needs an NVIDIA GPU (numba.cuda.is_available() is False)"
)
S = jax.ShapeDtypeStruct


@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[()] * x[i] + y[i]


@cuda.jit
def add2d(x, y, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = x[i, j] + y[i, j]


@cuda.jit
def scale3d(x, out):
    i, j, k = cuda.grid(3)
    if i < out.shape[0] and j < out.shape[1] and k < out.shape[2]:
        out[i, j, k] = 2 * x[i, j, k]


@cuda.jit
def block_sum(x, out):
    # Shared memory (dynamic): each block sums its slice of x.
    buf = cuda.shared.array(0, dtype=np.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = x[i] if i < x.size else 0
    cuda.syncthreads()
    if t == 0:
        acc = 0.0
        for s in range(cuda.blockDim.x):
            acc += buf[s]
        out[cuda.blockIdx.x] = acc


@cuda.jit
def split(x, hi, lo):  # a dict's outputs come in key order
    i = cuda.grid(1)
    if i < x.size:
        lo[i] = min(x[i], 0)
        hi[i] = max(x[i], 0)


@cuda.jit
def increment(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += 1


@cuda.jit
def cumsum_rows(x, out):
    # Couples a whole row: one thread per row.
    r = cuda.grid(1)
    if r < out.shape[0]:
        acc = 0.0
        for j in range(out.shape[1]):
            acc += x[r, j]
            out[r, j] = acc


def _x(n, offset=0.0):
    return jnp.arange(n, dtype=jnp.float32) + offset


@pytest.mark.parametrize("jit", [False, True])
def test_elementwise(jit):
    n = 1000
    f = numba_cuda_kernel(axpy, S((n,), jnp.float32), launch_dims=n)
    f = jax.jit(f) if jit else f
    a, x, y = jnp.float32(3), _x(n), _x(n, 1)
    np.testing.assert_allclose(f(a, x, y), 3 * x + y)


def test_2d_and_3d():
    x = jnp.arange(37 * 45, dtype=jnp.float32).reshape(37, 45)
    f = jax.jit(numba_cuda_kernel(add2d, S(x.shape, x.dtype), launch_dims=x.shape))
    np.testing.assert_array_equal(f(x, x), 2 * x)
    z = jnp.arange(5 * 6 * 7, dtype=jnp.float32).reshape(5, 6, 7)
    g = numba_cuda_kernel(scale3d, S(z.shape, z.dtype), grid=(1, 2, 2), block=(8, 4, 4))
    np.testing.assert_array_equal(jax.jit(g)(z), 2 * z)


def test_shared_memory():
    x = _x(1024)
    f = numba_cuda_kernel(block_sum, S((8,), jnp.float32), grid=8, block=128, shared_mem=128 * 4)
    np.testing.assert_allclose(jax.jit(f)(x), x.reshape(8, 128).sum(1))


def test_multiple_outputs_and_pytree():
    x = _x(100, -50)
    f = numba_cuda_kernel(
        split, {"lo": S((100,), jnp.float32), "hi": S((100,), jnp.float32)}, launch_dims=100
    )
    out = jax.jit(f)(x)
    np.testing.assert_array_equal(out["lo"], jnp.minimum(x, 0))
    np.testing.assert_array_equal(out["hi"], jnp.maximum(x, 0))


def test_aliases_with_donation():
    f = numba_cuda_kernel(
        increment, S((64,), jnp.float32), launch_dims=64, input_output_aliases={0: 0}
    )
    x = _x(64)
    np.testing.assert_array_equal(jax.jit(f)(x), x + 1)
    np.testing.assert_array_equal(jax.jit(f, donate_argnums=0)(_x(64)), x + 1)


def test_zero_size():
    f = numba_cuda_kernel(add2d, S((0, 5), jnp.float32), launch_dims=(1, 5))
    assert jax.jit(f)(jnp.zeros((0, 5)), jnp.zeros((0, 5))).shape == (0, 5)


@pytest.mark.parametrize("method", [None, "sequential", "sequential_unrolled", "fold"])
def test_vmap(method):
    x = jnp.arange(4 * 6 * 5, dtype=jnp.float32).reshape(4, 6, 5)
    f = numba_cuda_kernel(cumsum_rows, S((6, 5), jnp.float32), launch_dims=6, vmap_method=method)
    np.testing.assert_allclose(jax.jit(jax.vmap(f))(x), jnp.cumsum(x, axis=-1))
    # Nested vmap and an unbatched argument.
    g = numba_cuda_kernel(add2d, S((6, 5), jnp.float32), launch_dims=(6, 5), vmap_method=method)
    y = x[0]
    np.testing.assert_array_equal(jax.vmap(lambda a: g(a, y))(x), x + y)
    xx = jnp.stack([x, x + 1])
    np.testing.assert_array_equal(jax.jit(jax.vmap(jax.vmap(g)))(xx, xx), 2 * xx)


def test_inside_scan():
    n = 256
    f = numba_cuda_kernel(axpy, S((n,), jnp.float32), launch_dims=n)

    @jax.jit
    def loop(x):
        return jax.lax.scan(lambda c, _: (f(jnp.float32(1), c, c), None), x, None, length=10)[0]

    np.testing.assert_allclose(loop(_x(n)), _x(n) * 2**10)


# numba-cuda warns of low occupancy when the callable launches 4 blocks; the
# suite turns warnings into errors, which the callable would then raise.
@pytest.mark.filterwarnings("ignore::numba.cuda.core.errors.NumbaPerformanceWarning")
def test_callable_with_temporaries_and_errors():
    n = 1000

    def two_steps(a, x, out, stream):
        tmp = temporary(x.shape, x.dtype)
        blocks = (x.size + 255) // 256
        axpy[blocks, 256, stream](a, x, x, tmp)  # tmp = a*x + x
        axpy[blocks, 256, stream](a, tmp, x, out)  # out = a*tmp + x

    f = numba_cuda_callable(two_steps, S((n,), jnp.float32))
    a, x = jnp.float32(2), _x(n)
    expected = 2 * (2 * x + x) + x
    np.testing.assert_allclose(jax.jit(f)(a, x), expected)
    np.testing.assert_allclose(
        jax.vmap(f, in_axes=(None, 0))(a, jnp.stack([x, x])), jnp.stack([expected] * 2)
    )

    def failing(x, out, stream):
        raise ValueError("bad input")

    g = numba_cuda_callable(failing, S((n,), jnp.float32))
    with pytest.raises(
        Exception, match=re.escape("numba cuda callable 'failing' failed: ValueError: bad input")
    ):
        jax.jit(g)(x).block_until_ready()


def test_cpu_placement_is_refused():
    f = numba_cuda_kernel(axpy, S((4,), jnp.float32), launch_dims=4)
    cpu = jax.devices("cpu")[0]
    x = jax.device_put(_x(4), cpu)
    with pytest.raises(
        RuntimeError, match=re.escape("numba cuda kernel 'axpy' runs on NVIDIA GPUs only")
    ):
        jax.jit(f)(jax.device_put(jnp.float32(1), cpu), x, x)
