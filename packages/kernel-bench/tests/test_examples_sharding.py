"""The bundled examples' sharding rules: under a sharded jit over four CPU
devices each device computes its shard, with no all-gather."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ffi_core.testing import custom_calls, device_mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from kernel_bench.examples import axpy, csr_matvec, exp_trace, lif_step


@pytest.fixture
def mesh():
    return device_mesh((4,), ("d",))


def _numba_calls(hlo):
    return custom_calls(hlo, "numba_cpu.")


@pytest.mark.parametrize(
    ("name", "fn", "expected"),
    [
        ("axpy", lambda x, y: axpy.call(x, y, jnp.float32([2.0])), lambda x, y: 2 * x + y),
        ("exp_trace", exp_trace.call, lambda t, s: t * np.exp(np.float32(-0.01)) + s),
        ("lif_step", lambda v, i: lif_step.call(v, i)[0], None),
    ],
)
def test_elementwise_examples(mesh, name, fn, expected):
    n = 4096
    x = jax.device_put(jnp.linspace(0, 1, n, dtype=jnp.float32), NamedSharding(mesh, P("d")))
    f = jax.jit(fn)
    out = f(x, x)
    assert out.sharding.is_equivalent_to(NamedSharding(mesh, P("d")), 1)
    if expected is not None:
        np.testing.assert_allclose(out, expected(np.asarray(x), np.asarray(x)), rtol=1e-5)
    hlo = f.lower(x, x).compile().as_text()
    assert "all-gather" not in hlo
    assert all(f"f32[{n // 4}]" in c for c in _numba_calls(hlo))


def test_csr_matvec_over_a_batch_of_vectors(mesh):
    rng = np.random.default_rng(0)
    dense = (rng.random((64, 32)) < 0.1) * rng.standard_normal((64, 32))
    rows, cols = np.nonzero(dense)
    data = jnp.asarray(dense[rows, cols], jnp.float32)
    indices = jnp.asarray(cols, jnp.int32)
    indptr = jnp.asarray(
        np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=64))]), jnp.int32
    )
    vs = jax.device_put(
        jnp.asarray(rng.standard_normal((8, 32)), jnp.float32), NamedSharding(mesh, P("d"))
    )
    f = jax.jit(jax.vmap(lambda v: csr_matvec.call(data, indices, indptr, v, shape=(64, 32))))
    out = f(vs)
    np.testing.assert_allclose(
        out, np.asarray(vs) @ dense.T.astype(np.float32), rtol=1e-4, atol=1e-5
    )
    assert out.sharding.is_equivalent_to(NamedSharding(mesh, P("d")), 2)
    hlo = f.lower(vs).compile().as_text()
    assert "all-gather" not in hlo
    # Each device multiplies A by its 2 of the 8 vectors.
    assert "f32[64,2]" in _numba_calls(hlo)[0]


def test_backend_auto_runs_the_chosen_backend_on_each_shard(mesh):
    from kernel_bench import autotune

    n = 4096
    x = jax.device_put(jnp.linspace(0, 1, n, dtype=jnp.float32), NamedSharding(mesh, P("d")))
    f = jax.jit(lambda t, s: exp_trace.call(t, s, backend="auto"))
    with autotune.recording() as found:
        out = f(x, x)
    np.testing.assert_allclose(
        out, np.asarray(x) * np.exp(np.float32(-0.01)) + np.asarray(x), rtol=1e-5
    )
    assert out.sharding.is_equivalent_to(NamedSharding(mesh, P("d")), 1)
    assert found and found[0].backend in exp_trace.available_backends("cpu")
    hlo = f.lower(x, x).compile().as_text()
    assert "all-gather" not in hlo
