"""partitioned_call under a sharded jit, with a primitive lowered by jnp code
standing for a bridge's native call (the bridges' own tests run real kernels,
and check that without a rule XLA gathers their operands)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ffi_core import ShardingRule
from ffi_core.bridge import BoundPrimitive, partitioned_call
from ffi_core.testing import device_mesh
from jax.extend.core import Primitive
from jax.interpreters import mlir
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

# A "kernel" with a matvec's signature: out[i] = sum_k a[i, k] * v[k], and the
# number of elements of `a` it saw.
matvec_p = Primitive("ffi_core_test_matvec")
matvec_p.multiple_results = True
matvec_p.def_abstract_eval(lambda a, v, *, out_avals: list(out_avals))
mlir.register_lowering(
    matvec_p,
    mlir.lower_fun(
        lambda a, v, *, out_avals: [a @ v, jnp.full(out_avals[1].shape, a.size, jnp.int32)],
        multiple_results=True,
    ),
)
matvec_p.def_impl(
    lambda a, v, *, out_avals: [a @ v, jnp.full(out_avals[1].shape, a.size, jnp.int32)]
)

CALL = BoundPrimitive(matvec_p, ())


def matvec(a, v, rule):
    outs = (
        jax.core.ShapedArray(a.shape[:1], a.dtype),
        jax.core.ShapedArray(a.shape[:1], jnp.int32),
    )
    if rule is not None:
        rule = rule.resolve([a.shape, v.shape], [o.shape for o in outs], name="kernel 'matvec'")
    return partitioned_call(CALL, [a, v], outs, rule)


@pytest.fixture
def mesh():
    return device_mesh((2, 2), ("r", "c"))


def _operands(mesh):
    a = jnp.arange(8 * 6, dtype=jnp.float32).reshape(8, 6)
    v = jnp.arange(6, dtype=jnp.float32)
    a = jax.device_put(a, NamedSharding(mesh, P("r", "c")))
    v = jax.device_put(v, NamedSharding(mesh, P("c")))
    return a, v


@pytest.mark.parametrize(
    ("rule", "seen", "collective"),
    [
        # k kept whole: each call sees 4 rows of 6 (k gathered along "c").
        (ShardingRule("i k, k -> i, i"), 24, "all-gather"),
        # k split: each call sees a 4 x 3 block (12); the partial results,
        # the count too, are summed over "c".
        (ShardingRule("i k, k -> i, i", reduction_factors=("k",)), 12 * 2, "all-reduce"),
    ],
)
def test_partitions_by_the_rule(mesh, rule, seen, collective):
    a, v = _operands(mesh)
    f = jax.jit(lambda a, v: matvec(a, v, rule))
    out, sizes = f(a, v)
    np.testing.assert_allclose(out, np.asarray(a) @ np.asarray(v))
    assert set(np.asarray(sizes).tolist()) == {seen}
    hlo = f.lower(a, v).compile().as_text()
    assert collective in hlo
    assert out.sharding.is_equivalent_to(NamedSharding(mesh, P("r")), 1)


def test_export_of_a_partitioned_call_is_refused(mesh):
    a, v = _operands(mesh)
    rule = ShardingRule("i k, k -> i, i")
    exp = jax.jit(lambda a, v: matvec(a, v, None))
    jax.export.export(exp)(a, v)  # without a rule: replicated, exports
    f = jax.jit(lambda a, v: matvec(a, v, rule))
    with pytest.raises(
        NotImplementedError,
        match=re.escape(
            "a kernel with `sharding_rule` 'i k, k -> i, i' is exported for 4 devices, but "
            "jax.export cannot serialize the partitioning callback it runs on "
            "(jax.experimental.custom_partitioning); call the kernel inside jax.shard_map "
            "(each device then runs it on its shard, and that exports), or export for one "
            "device"
        ),
    ):
        jax.export.export(f)(a, v)
    # On one device, the rule changes nothing and the call exports.
    one = jax.jit(lambda a, v: matvec(a, v, rule))
    jax.export.export(one)(jnp.ones((8, 6)), jnp.ones(6))


# A "kernel" whose inputs name their factors out of the order the rule keeps
# whole: out[i] = v[i] * sum(w), rule "k, i -> i" (k implicitly whole).
scaled_p = Primitive("ffi_core_test_scaled_by_sum")
scaled_p.multiple_results = True
scaled_p.def_abstract_eval(lambda w, v, *, out_avals: list(out_avals))
mlir.register_lowering(
    scaled_p,
    mlir.lower_fun(lambda w, v, *, out_avals: [v * w.sum()], multiple_results=True),
)
scaled_p.def_impl(lambda w, v, *, out_avals: [v * w.sum()])


@pytest.mark.parametrize(
    "rule",
    [
        ShardingRule("k, i -> i", need_replication_factors=("i",)),
        ShardingRule("k, i -> i", need_replication_factors=("i", "k")),
        ShardingRule("k, i -> i", need_replication_factors=("k", "i")),
    ],
)
def test_special_factors_lower_in_rule_order(mesh, rule):
    # Shardy refuses special factors out of the order they appear in the rule
    # ("indices of special factors must be sorted"): i after k here.
    assert rule.whole_factors == ("k", "i")
    assert rule.need_replication_factors in (("i",), ("k", "i"))
    w = jax.device_put(jnp.arange(8, dtype=jnp.float32), NamedSharding(mesh, P("r")))
    v = jax.device_put(jnp.arange(6, dtype=jnp.float32), NamedSharding(mesh, P("c")))
    out_avals = (jax.core.ShapedArray((6,), jnp.float32),)

    def f(w, v):
        resolved = rule.resolve([w.shape, v.shape], [(6,)], name="kernel 'scaled'")
        return partitioned_call(BoundPrimitive(scaled_p, ()), [w, v], out_avals, resolved)[0]

    np.testing.assert_allclose(jax.jit(f)(w, v), np.arange(6) * np.arange(8).sum())


def test_reduction_factors_kept_in_rule_order():
    rule = ShardingRule("i k j, k j -> i", reduction_factors=("j", "k"))
    assert rule.reduction_factors == ("k", "j")
    assert rule.factors == ("i", "k", "j")
    assert rule == ShardingRule("i k j, k j -> i", reduction_factors=("k", "j"))
