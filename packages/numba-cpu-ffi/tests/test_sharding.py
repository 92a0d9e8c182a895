"""numba_kernel under a sharded jit: with a `sharding_rule` each device runs the
kernel on its shard (the same native handler, local shapes)."""

import re

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from ffi_core import ShardingRule
from ffi_core.testing import custom_calls, device_mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from numba_cpu_ffi import numba_kernel


@numba.njit
def add(x, y, out):
    for i in range(x.size):
        out[i] = x[i] + y[i]


@numba.njit
def add_counting(x, y, out, seen):
    for i in range(x.size):
        out[i] = x[i] + y[i]
        seen[i] = x.size


@numba.njit
def matvec(a, v, out):
    for i in range(a.shape[0]):
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[i, k] * v[k]
        out[i] = acc


N = 1024


@pytest.fixture
def line():
    return device_mesh((4,), ("d",))


@pytest.fixture
def grid():
    return device_mesh((2, 2), ("r", "c"))


def _custom_calls(hlo: str) -> list[str]:
    return custom_calls(hlo, "numba_cpu.")


def test_without_a_rule_operands_are_gathered(line):
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), NamedSharding(line, P("d")))
    f = jax.jit(lambda a, b: numba_kernel(add, jax.ShapeDtypeStruct(a.shape, a.dtype))(a, b))
    assert f(x, x).sharding.is_equivalent_to(NamedSharding(line, P()), 1)
    hlo = f.lower(x, x).compile().as_text()
    assert "all-gather" in hlo
    assert "f32[1024]" in _custom_calls(hlo)[0]


@pytest.mark.parametrize("rule", ["elementwise", "i, i -> i, i"])
def test_elementwise_runs_on_each_shard(line, rule):
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), NamedSharding(line, P("d")))
    outs = (jax.ShapeDtypeStruct((N,), jnp.float32), jax.ShapeDtypeStruct((N,), jnp.int64))
    op = numba_kernel(add_counting, outs, sharding_rule=rule)
    f = jax.jit(op)
    out, seen = f(x, x)
    np.testing.assert_array_equal(out, 2 * np.arange(N, dtype=np.float32))
    # Each handler call saw a quarter of the elements: each device did 1/4 of the work.
    np.testing.assert_array_equal(seen, np.full(N, N // 4))
    assert out.sharding.is_equivalent_to(NamedSharding(line, P("d")), 1)
    hlo = f.lower(x, x).compile().as_text()
    assert "all-gather" not in hlo
    (call,) = _custom_calls(hlo)
    assert "f32[256]" in call and "f32[1024]" not in call
    # Eager calls on sharded arrays are partitioned too.
    assert op(x, x)[0].sharding.is_equivalent_to(NamedSharding(line, P("d")), 1)


def _matrix(grid):
    a = jnp.arange(64 * 32, dtype=jnp.float32).reshape(64, 32) / 100
    v = jnp.arange(32, dtype=jnp.float32) / 10
    return (
        jax.device_put(a, NamedSharding(grid, P("r", "c"))),
        jax.device_put(v, NamedSharding(grid, P("c"))),
    )


@pytest.mark.parametrize(
    ("rule", "local", "collective"),
    [
        # k kept whole (need_replication, or implicitly: it is in no output).
        ("i k, k -> i", "f32[32,32]", "all-gather"),
        (ShardingRule("i k, k -> i", need_replication_factors=("k",)), "f32[32,32]", "all-gather"),
        # k summed over: each device takes a 32 x 16 block, partial sums psum-ed over "c".
        (ShardingRule("i k, k -> i", reduction_factors=("k",)), "f32[32,16]", "all-reduce"),
    ],
)
def test_matvec(grid, rule, local, collective):
    a, v = _matrix(grid)
    f = jax.jit(
        lambda a, v: numba_kernel(
            matvec, jax.ShapeDtypeStruct((64,), jnp.float32), sharding_rule=rule
        )(a, v)
    )
    out = f(a, v)
    np.testing.assert_allclose(out, np.asarray(a) @ np.asarray(v), rtol=1e-5)
    assert out.sharding.is_equivalent_to(NamedSharding(grid, P("r")), 1)
    hlo = f.lower(a, v).compile().as_text()
    (call,) = _custom_calls(hlo)
    assert local in call
    assert collective in hlo
    if collective == "all-reduce":
        assert "all-gather" not in hlo


def test_vmap_batch_is_a_factor(line):
    xs = jax.device_put(
        jnp.arange(8 * N, dtype=jnp.float32).reshape(8, N), NamedSharding(line, P("d"))
    )
    y = jnp.arange(N, dtype=jnp.float32)
    op = numba_kernel(add, jax.ShapeDtypeStruct((N,), jnp.float32), sharding_rule="elementwise")
    f = jax.jit(jax.vmap(op, in_axes=(0, None)))
    out = f(xs, y)
    np.testing.assert_array_equal(out, np.asarray(xs) + np.asarray(y))
    assert out.sharding.is_equivalent_to(NamedSharding(line, P("d")), 2)
    hlo = f.lower(xs, y).compile().as_text()
    assert "all-gather" not in hlo
    assert "f32[2,1024]" in _custom_calls(hlo)[0]


def test_aliases_and_shard_map(line):
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), NamedSharding(line, P("d")))
    op = numba_kernel(
        add,
        jax.ShapeDtypeStruct((N,), jnp.float32),
        input_output_aliases={1: 0},
        sharding_rule="elementwise",
    )
    f = jax.jit(op, donate_argnums=1)
    out = f(x, x + 1)
    np.testing.assert_array_equal(out, 2 * np.arange(N) + 1)
    assert "all-gather" not in f.lower(x, x).compile().as_text()
    # Inside shard_map the kernel sees its shard already: the rule changes nothing.
    local = numba_kernel(
        add, jax.ShapeDtypeStruct((N // 4,), jnp.float32), sharding_rule="elementwise"
    )
    sm = jax.jit(jax.shard_map(lambda a: local(a, a), mesh=line, in_specs=P("d"), out_specs=P("d")))
    np.testing.assert_array_equal(sm(x), 2 * np.arange(N))


def test_a_rule_that_does_not_fit_the_call_is_refused_at_the_call():
    op = numba_kernel(matvec, jax.ShapeDtypeStruct((64,), jnp.float32), sharding_rule="i k, k -> i")
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`sharding_rule` 'i k, k -> i' gives factor 'k' size 32 (input 0 dimension 1) "
            "and size 16 (input 1 dimension 0) in kernel 'matvec'; a factor has one size "
            "everywhere it appears"
        ),
    ):
        op(jnp.ones((64, 32), jnp.float32), jnp.ones(16, jnp.float32))
    with pytest.raises(
        TypeError,
        match=re.escape(
            "`sharding_rule` must be None, a str or an ffi_core.ShardingRule, got <class 'dict'>"
        ),
    ):
        numba_kernel(add, jax.ShapeDtypeStruct((4,), jnp.float32), sharding_rule={})


def test_export_refuses_a_partitioned_call_and_shard_map_round_trips(line):
    from ffi_core import deserialize, export, serialize

    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), NamedSharding(line, P("d")))
    op = numba_kernel(add, jax.ShapeDtypeStruct((N,), jnp.float32), sharding_rule="elementwise")
    with pytest.raises(
        NotImplementedError,
        match=re.escape(
            "a kernel with `sharding_rule` 'e0, e0 -> e0' is exported for 4 devices, but "
            "jax.export cannot serialize the partitioning callback it runs on "
            "(jax.experimental.custom_partitioning); call the kernel inside jax.shard_map "
            "(each device then runs it on its shard, and that exports), or export for one "
            "device"
        ),
    ):
        export(jax.jit(op))(x, x)
    local = numba_kernel(
        add, jax.ShapeDtypeStruct((N // 4,), jnp.float32), sharding_rule="elementwise"
    )
    sm = jax.jit(jax.shard_map(lambda a: local(a, a), mesh=line, in_specs=P("d"), out_specs=P("d")))
    key = b"numba-cpu-ffi tests: 32-byte key"
    again = deserialize(serialize(export(sm)(x), key=key), key=key)
    np.testing.assert_array_equal(again.call(x), 2 * np.arange(N))
    # Exported for one device, the rule changes nothing.
    one = deserialize(
        serialize(
            export(jax.jit(op))(np.arange(N, dtype=np.float32), np.ones(N, np.float32)), key=key
        ),
        key=key,
    )
    np.testing.assert_array_equal(
        one.call(np.zeros(N, np.float32), np.ones(N, np.float32)), np.ones(N)
    )


def test_differentiation_gives_the_kernels_own_error():
    op = numba_kernel(add, jax.ShapeDtypeStruct((4,), jnp.float32), sharding_rule="elementwise")
    with pytest.raises(NotImplementedError, match=re.escape("numba kernel 'add' has no JVP rule")):
        jax.grad(lambda x: op(x, x).sum())(jnp.ones(4, jnp.float32))
