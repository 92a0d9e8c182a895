"""warp_kernel under a sharded jit: with a `sharding_rule` each device launches
the kernel on its shard (Warp's CPU entry point, local shapes)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ffi_core import ShardingRule
from ffi_core.testing import custom_calls, device_mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

wp = pytest.importorskip("warp")
from warp_ffi import warp_kernel  # noqa: E402

N = 1024


@wp.kernel
def scale_counting(
    x: wp.array(dtype=wp.float32),
    alpha: wp.float32,
    out: wp.array(dtype=wp.float32),
    seen: wp.array(dtype=wp.int32),
):
    i = wp.tid()
    out[i] = alpha * x[i] * x[i]
    seen[i] = x.shape[0]


@wp.kernel
def matvec(
    a: wp.array2d(dtype=wp.float32), v: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)
):
    i = wp.tid()
    acc = wp.float32(0.0)
    for k in range(a.shape[1]):
        acc += a[i, k] * v[k]
    out[i] = acc


@pytest.fixture
def line():
    return device_mesh((4,), ("d",))


@pytest.fixture
def grid():
    return device_mesh((2, 2), ("r", "c"))


def _custom_calls(hlo: str) -> list[str]:
    return custom_calls(hlo, "warp")


def _outs():
    return (jax.ShapeDtypeStruct((N,), jnp.float32), jax.ShapeDtypeStruct((N,), jnp.int32))


def test_without_a_rule_operands_are_gathered(line):
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), NamedSharding(line, P("d")))
    f = jax.jit(lambda x: warp_kernel(scale_counting, _outs())(x, alpha=2.0))
    _, seen = f(x)
    np.testing.assert_array_equal(seen, np.full(N, N))
    assert "all-gather" in f.lower(x).compile().as_text()


@pytest.mark.parametrize("rule", ["elementwise", "i -> i, i"])
def test_elementwise_runs_on_each_shard(line, rule):
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), NamedSharding(line, P("d")))
    op = warp_kernel(scale_counting, _outs(), sharding_rule=rule)
    f = jax.jit(lambda x: op(x, alpha=2.0))
    out, seen = f(x)
    np.testing.assert_allclose(out, 2.0 * np.arange(N) ** 2)
    np.testing.assert_array_equal(seen, np.full(N, N // 4))
    assert out.sharding.is_equivalent_to(NamedSharding(line, P("d")), 1)
    hlo = f.lower(x).compile().as_text()
    assert "all-gather" not in hlo
    (call,) = _custom_calls(hlo)
    assert "f32[256]" in call and "f32[1024]" not in call


def test_grad_of_an_elementwise_kernel_runs_the_adjoint_on_shards(line):
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32) / N, NamedSharding(line, P("d")))
    op = warp_kernel(scale_counting, _outs(), sharding_rule="elementwise")
    f = jax.jit(jax.grad(lambda x: op(x, alpha=3.0)[0].sum()))
    g = f(x)
    np.testing.assert_allclose(g, 6.0 * np.asarray(x), rtol=1e-6)
    hlo = f.lower(x).compile().as_text()
    assert "all-gather" not in hlo
    assert all("f32[1024]" not in c for c in _custom_calls(hlo))


@pytest.mark.parametrize(
    ("rule", "local", "collective"),
    [
        ("i k, k -> i", "f32[32,32]", "all-gather"),
        (ShardingRule("i k, k -> i", reduction_factors=("k",)), "f32[32,16]", "all-reduce"),
    ],
)
def test_matvec(grid, rule, local, collective):
    a = jnp.arange(64 * 32, dtype=jnp.float32).reshape(64, 32) / 100
    v = jnp.arange(32, dtype=jnp.float32) / 10
    a = jax.device_put(a, NamedSharding(grid, P("r", "c")))
    v = jax.device_put(v, NamedSharding(grid, P("c")))
    op = warp_kernel(matvec, jax.ShapeDtypeStruct((64,), jnp.float32), sharding_rule=rule)
    f = jax.jit(op)
    out = f(a, v)
    np.testing.assert_allclose(out, np.asarray(a) @ np.asarray(v), rtol=1e-5)
    assert out.sharding.is_equivalent_to(NamedSharding(grid, P("r")), 1)
    hlo = f.lower(a, v).compile().as_text()
    (call,) = _custom_calls(hlo)
    assert local in call
    assert collective in hlo


def test_fixed_launch_dims_are_refused_with_a_rule():
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`launch_dims` is fixed (1024), but with `sharding_rule` the kernel runs on shards "
            "whose shapes differ from the whole arrays; pass launch_dims=None (the first "
            "output's shape) or a callable of the input shapes"
        ),
    ):
        warp_kernel(scale_counting, _outs(), launch_dims=N, sharding_rule="elementwise")
