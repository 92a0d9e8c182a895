"""CSR sparse matrix times dense vector / matrix through XLACustomKernel,
checked against scipy and a dense product, with JVP and transpose rules."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from jax.test_util import check_grads
from kernel_bench.examples import csr_matmat, csr_matvec, random_csr

BACKENDS = ("numba", "jax", "jax_sparse")
M, N, K = 60, 45, 7


@pytest.fixture(scope="module")
def csr():
    data, indices, indptr = random_csr(M, N, 0.15, seed=11)
    return data, indices, indptr, sp.csr_matrix((data, indices, indptr), shape=(M, N))


def matvec(csr, backend, transpose=False):
    _, indices, indptr, _ = csr
    return lambda d, v: csr_matvec.call(
        d, indices, indptr, v, shape=(M, N), transpose=transpose, backend=backend
    )


def matmat(csr, backend, transpose=False):
    _, indices, indptr, _ = csr
    return lambda d, b: csr_matmat.call(
        d, indices, indptr, b, shape=(M, N), transpose=transpose, backend=backend
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("transpose", [False, True])
def test_matvec_matches_scipy_and_dense(backend, transpose, csr):
    data, _, _, a = csr
    v = np.random.default_rng(1).standard_normal(M if transpose else N).astype(np.float32)
    y = jax.jit(matvec(csr, backend, transpose))(data, v)
    expected = a.T @ v if transpose else a @ v
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    dense = a.toarray()
    np.testing.assert_allclose(y, (dense.T if transpose else dense) @ v, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("transpose", [False, True])
def test_matmat_matches_scipy(backend, transpose, csr):
    data, _, _, a = csr
    b = np.random.default_rng(2).standard_normal((M if transpose else N, K)).astype(np.float32)
    y = matmat(csr, backend, transpose)(data, b)
    np.testing.assert_allclose(y, (a.T if transpose else a) @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_matvec_vmap_over_vectors_and_values(backend, csr):
    data, _, _, a = csr
    vs = np.random.default_rng(3).standard_normal((8, N)).astype(np.float32)
    ys = jax.jit(jax.vmap(matvec(csr, backend), in_axes=(None, 0)))(data, vs)
    np.testing.assert_allclose(ys, (a @ vs.T).T, rtol=1e-5, atol=1e-5)
    scales = np.arange(1, 4, dtype=np.float32)
    ys = jax.vmap(matvec(csr, backend), in_axes=(0, None))(scales[:, None] * data, vs[0])
    np.testing.assert_allclose(ys, scales[:, None] * (a @ vs[0]), rtol=1e-5, atol=1e-5)


def test_numba_vmap_is_one_native_call(csr):
    data = csr[0]
    vs = jnp.ones((32, N), jnp.float32)
    text = jax.jit(jax.vmap(matvec(csr, "numba"), in_axes=(None, 0))).lower(data, vs).as_text()
    assert text.count("stablehlo.custom_call") == 1
    assert "stablehlo.while" not in text


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("transpose", [False, True])
def test_matvec_gradients(backend, transpose, csr):
    data, indices, indptr, a = csr
    rng = np.random.default_rng(4)
    v = rng.standard_normal(M if transpose else N).astype(np.float32)
    w = rng.standard_normal(N if transpose else M).astype(np.float32)
    f = matvec(csr, backend, transpose)
    g_data, g_v = jax.jit(jax.grad(lambda d, v: jnp.dot(w, f(d, v)), argnums=(0, 1)))(data, v)
    rows = np.repeat(np.arange(M), np.diff(indptr))
    expected_data = w[indices] * v[rows] if transpose else w[rows] * v[indices]
    np.testing.assert_allclose(g_data, expected_data, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g_v, (a if transpose else a.T) @ w, rtol=1e-5, atol=1e-5)
    with jax.enable_x64(True):
        args = (data.astype(np.float64), v.astype(np.float64))
        check_grads(f, args, order=2, modes=["fwd", "rev"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_matvec_gradients_under_vmap(backend, csr):
    data = csr[0]
    vs = np.random.default_rng(5).standard_normal((3, N))
    f = matvec(csr, backend)
    with jax.enable_x64(True):
        d64 = data.astype(np.float64)
        check_grads(jax.vmap(f, in_axes=(None, 0)), (d64, vs), order=1, modes=["fwd", "rev"])
        per_vector = jax.vmap(jax.grad(lambda d, v: f(d, v).sum()), in_axes=(None, 0))(d64, vs)
        summed = jax.grad(lambda d: jax.vmap(f, in_axes=(None, 0))(d, vs).sum())(d64)
        np.testing.assert_allclose(per_vector.sum(0), summed, rtol=1e-10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_matvec_linear_transpose(backend, csr):
    data, _, _, a = csr
    f = matvec(csr, backend)
    u = np.random.default_rng(6).standard_normal(M).astype(np.float32)
    (ct,) = jax.linear_transpose(lambda v: f(data, v), np.zeros(N, np.float32))(u)
    np.testing.assert_allclose(ct, a.T @ u, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_matmat_gradients(backend, csr):
    data, indices, indptr, a = csr
    rng = np.random.default_rng(7)
    b = rng.standard_normal((N, K)).astype(np.float32)
    w = rng.standard_normal((M, K)).astype(np.float32)
    f = matmat(csr, backend)
    g_data, g_b = jax.grad(lambda d, b: jnp.sum(w * f(d, b)), argnums=(0, 1))(data, b)
    rows = np.repeat(np.arange(M), np.diff(indptr))
    np.testing.assert_allclose(g_data, (w[rows] * b[indices]).sum(1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g_b, a.T @ w, rtol=1e-4, atol=1e-5)
    with jax.enable_x64(True):
        check_grads(
            f, (data.astype(np.float64), b.astype(np.float64)), order=2, modes=["fwd", "rev"]
        )
