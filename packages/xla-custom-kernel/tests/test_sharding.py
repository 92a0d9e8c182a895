"""XLACustomKernel under a sharded jit: def_sharding_rule / sharding_rule=."""

import re

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from ffi_core import ShardingRule
from ffi_core.testing import custom_calls, device_mesh
from jax.interpreters import ad
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from xla_custom_kernel import XLACustomKernel

N = 1024


@numba.njit
def _mul(a, x, out):
    for i in range(x.size):
        out[i] = a[i] * x[i]


@numba.njit
def _matvec(a, v, out):
    for i in range(a.shape[0]):
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[i, k] * v[k]
        out[i] = acc


def _mul_op(name):
    k = XLACustomKernel(name)
    k.def_numba_kernel(lambda outs: _mul)
    k.def_jax_kernel(lambda outs: lambda a, x: a * x)
    k.def_jvp_rule2(
        lambda ta, a, x, outs: k(ta, x, outs=outs),
        lambda tx, a, x, outs: k(a, tx, outs=outs),
    )

    @k.def_transpose_rule
    def _(cts, a, x, *, outs):
        (ct,) = cts
        if ad.is_undefined_primal(a):
            return [k(ct, x, outs=outs), None]
        return [None, k(a, ct, outs=outs)]

    k.def_sharding_rule("elementwise")
    return k


@pytest.fixture
def line():
    return device_mesh((4,), ("d",))


def _sharded(mesh, *arrays):
    return [jax.device_put(a, NamedSharding(mesh, P("d"))) for a in arrays]


def _calls(hlo: str) -> list[str]:
    return custom_calls(hlo, "numba_cpu.")


def test_def_sharding_rule_runs_each_shard(line):
    k = _mul_op("sharding_mul")
    assert k.sharding_rule == ShardingRule("elementwise")
    a, x = _sharded(line, jnp.arange(N, dtype=jnp.float32), jnp.full(N, 2.0, jnp.float32))
    f = jax.jit(lambda a, x: k(a, x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)))
    out = f(a, x)
    np.testing.assert_array_equal(out, 2 * np.arange(N))
    assert out.sharding.is_equivalent_to(NamedSharding(line, P("d")), 1)
    hlo = f.lower(a, x).compile().as_text()
    assert "all-gather" not in hlo
    assert "f32[256]" in _calls(hlo)[0]


@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_grad_and_backends(line, backend):
    k = _mul_op(f"sharding_mul_grad_{backend}")
    a, x = _sharded(line, jnp.arange(N, dtype=jnp.float32), jnp.full(N, 2.0, jnp.float32))

    def loss(a, x):
        return k(a, x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), backend=backend).sum()

    f = jax.jit(jax.grad(loss, argnums=(0, 1)))
    ga, gx = f(a, x)
    np.testing.assert_array_equal(ga, np.asarray(x))
    np.testing.assert_array_equal(gx, np.asarray(a))
    hlo = f.lower(a, x).compile().as_text()
    assert "all-gather" not in hlo
    if backend == "numba":
        assert _calls(hlo) and all("f32[1024]" not in c for c in _calls(hlo))


def test_vmap_adds_a_batch_factor(line):
    k = _mul_op("sharding_mul_vmap")
    xs = jax.device_put(jnp.ones((8, N), jnp.float32), NamedSharding(line, P("d")))
    a = jnp.arange(N, dtype=jnp.float32)
    f = jax.jit(
        jax.vmap(lambda a, x: k(a, x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)), (None, 0))
    )
    out = f(a, xs)
    np.testing.assert_array_equal(out, np.broadcast_to(np.arange(N), (8, N)))
    hlo = f.lower(a, xs).compile().as_text()
    assert "all-gather" not in hlo
    assert "f32[2,1024]" in _calls(hlo)[0]


def test_per_call_rule_with_a_reduction_factor():
    mesh = device_mesh((2, 2), ("r", "c"))
    k = XLACustomKernel("sharding_matvec")
    k.def_numba_kernel(lambda outs: _matvec)
    a = jnp.arange(64 * 32, dtype=jnp.float32).reshape(64, 32) / 100
    v = jnp.arange(32, dtype=jnp.float32) / 10
    a = jax.device_put(a, NamedSharding(mesh, P("r", "c")))
    v = jax.device_put(v, NamedSharding(mesh, P("c")))
    rule = ShardingRule("i k, k -> i", reduction_factors=("k",))
    f = jax.jit(lambda a, v: k(a, v, outs=jax.ShapeDtypeStruct((64,), a.dtype), sharding_rule=rule))
    out = f(a, v)
    np.testing.assert_allclose(out, np.asarray(a) @ np.asarray(v), rtol=1e-5)
    hlo = f.lower(a, v).compile().as_text()
    assert "all-reduce" in hlo and "all-gather" not in hlo
    assert "f32[32,16]" in _calls(hlo)[0]
    # Without a rule: gathered.
    g = jax.jit(lambda a, v: k(a, v, outs=jax.ShapeDtypeStruct((64,), a.dtype)))
    assert "f32[64,32]" in _calls(g.lower(a, v).compile().as_text())[0]


def test_a_rule_that_does_not_fit_is_refused_at_the_call():
    k = _mul_op("sharding_mul_bad")
    x = jnp.ones(4, jnp.float32)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`sharding_rule` 'i -> i' has 1 inputs, but kernel 'sharding_mul_bad' is called "
            "with 2 inputs: inputs of shapes [4], [4] and outputs of shapes [4]"
        ),
    ):
        k(x, x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), sharding_rule="i -> i")
    with pytest.raises(
        TypeError,
        match=re.escape(
            "`sharding_rule` must be None, a str or an ffi_core.ShardingRule, got <class 'int'>"
        ),
    ):
        k.def_sharding_rule(3)
