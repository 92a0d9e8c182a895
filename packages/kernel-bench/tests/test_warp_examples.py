"""The bundled examples' warp backend: present where warp-ffi imports, absent
where it does not, and agreeing with the numba backend."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from kernel_bench.examples import (
    axpy,
    csr_matmat,
    csr_matvec,
    get_scale,
    lif_step,
    random_csr,
    set_scale,
)

M, N, K = 40, 30, 5
LIF = {"dt": 0.1, "tau": 10.0, "v_th": 1.0, "v_reset": 0.0}


@pytest.fixture(scope="module")
def warp_ffi():
    return pytest.importorskip("warp_ffi")


def _case(name: str):
    # (kernel, args, static keywords, index of the argument a vmap batches)
    rng = np.random.default_rng(0)
    data, indices, indptr = random_csr(M, N, 0.2, seed=3)

    def dense(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    return {
        "axpy": (axpy, (dense(257), dense(257), np.float32([0.5])), {}, 0),
        "lif_step": (
            lif_step,
            (rng.random(257, dtype=np.float32), (1.5 * rng.random(257)).astype(np.float32)),
            LIF,
            1,
        ),
        "csr_matvec": (csr_matvec, (data, indices, indptr, dense(N)), {"shape": (M, N)}, 3),
        "csr_matvec_t": (
            csr_matvec,
            (data, indices, indptr, dense(M)),
            {"shape": (M, N), "transpose": True},
            0,
        ),
        "csr_matmat": (csr_matmat, (data, indices, indptr, dense(N, K)), {"shape": (M, N)}, 3),
        "csr_matmat_t": (
            csr_matmat,
            (data, indices, indptr, dense(M, K)),
            {"shape": (M, N), "transpose": True},
            0,
        ),
    }[name]


CASES = ["axpy", "lif_step", "csr_matvec", "csr_matvec_t", "csr_matmat", "csr_matmat_t"]


def _assert_agree(warp, numba):
    for w, n in zip(jax.tree.leaves(warp), jax.tree.leaves(numba), strict=True):
        w, n = np.asarray(w), np.asarray(n)
        assert (w.dtype, w.shape) == (n.dtype, n.shape)
        if w.dtype == np.bool_:
            np.testing.assert_array_equal(w, n)
        else:
            # Not bit for bit: numba's fastmath may fuse and reorder the arithmetic.
            np.testing.assert_allclose(w, n, rtol=1e-6, atol=1e-6)


def _run(kernel, args, static, backend, batch=None):
    def f(*a):
        return kernel.call(*a, backend=backend, **static)

    if batch is not None:
        axes = [None] * len(args)
        axes[batch] = 0
        f = jax.vmap(f, in_axes=axes)
        args = list(args)
        args[batch] = np.stack([args[batch], 2 * args[batch], -args[batch]])
    return jax.jit(f)(*args)


@pytest.mark.parametrize("kernel", [axpy, lif_step, csr_matvec, csr_matmat], ids=lambda k: k.name)
def test_warp_backend_is_registered_on_cpu(warp_ffi, kernel):
    assert "warp" in kernel.available_backends("cpu")
    assert kernel.get_default("cpu") == "numba"


@pytest.mark.parametrize("name", CASES)
def test_warp_agrees_with_numba(warp_ffi, name):
    kernel, args, static, _ = _case(name)
    _assert_agree(_run(kernel, args, static, "warp"), _run(kernel, args, static, "numba"))


@pytest.mark.parametrize("name", CASES)
def test_warp_agrees_with_numba_under_vmap(warp_ffi, name):
    kernel, args, static, batch = _case(name)
    _assert_agree(
        _run(kernel, args, static, "warp", batch), _run(kernel, args, static, "numba", batch)
    )


@pytest.fixture
def quick_scale():
    before = get_scale()
    set_scale("quick")
    yield
    set_scale(before)


@pytest.mark.parametrize("kernel", [axpy, lif_step, csr_matvec], ids=lambda k: k.name)
def test_suite_compares_warp_with_numba(warp_ffi, quick_scale, kernel):
    result = kernel.benchmark(platform="cpu", n_warmup=0, n_runs=1, backends=["numba", "warp"])
    assert [r.backend for r in result.records] == ["numba", "warp"]
    assert all(r.success for r in result.records), [r.error for r in result.records]


def test_no_warp_backend_without_warp_ffi():
    # A None entry in sys.modules makes `import warp_ffi` raise ImportError.
    code = textwrap.dedent(
        """
        import sys
        sys.modules["warp_ffi"] = None
        from kernel_bench.examples import example_kernels
        print(sorted({b for k in example_kernels() for b in k.available_backends("cpu")}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    ).stdout
    assert out.splitlines()[-1] == "['jax', 'jax_sparse', 'numba']"
