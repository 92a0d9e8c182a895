import re

import ffi_core
import ffi_core.bridge
import jax
import numba
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from xla_custom_kernel import XLACustomKernel


@numba.njit
def _times2(x, out):
    for i in range(x.size):
        out[i] = 2 * x[i]


def _scale_op(name):
    k = XLACustomKernel(name)
    k.def_numba_kernel(lambda outs: _times2)
    k.def_jax_kernel(lambda outs: lambda x: x * 3)
    return k


def _call(k, backend=None):
    return lambda x: k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), backend=backend)


X = np.arange(16.0, dtype=np.float32)


def test_four_cpu_devices():
    assert jax.device_count() >= 4


@pytest.mark.parametrize(("backend", "factor"), [("numba", 2), ("jax", 3)])
def test_shard_map(name, backend, factor):
    k = _scale_op(name)
    mesh = Mesh(np.array(jax.devices()[:4]), ("d",))
    f = jax.shard_map(_call(k, backend), mesh=mesh, in_specs=P("d"), out_specs=P("d"))
    x = jax.device_put(X, NamedSharding(mesh, P("d")))
    y = jax.jit(f)(x)
    np.testing.assert_array_equal(y, factor * X)
    assert y.sharding.is_equivalent_to(x.sharding, 1)
    np.testing.assert_array_equal(f(x), factor * X)
    # vmap inside shard_map: one batched call per shard.
    g = jax.shard_map(jax.vmap(_call(k, backend)), mesh=mesh, in_specs=P("d"), out_specs=P("d"))
    np.testing.assert_array_equal(jax.jit(g)(X.reshape(8, 2)), factor * X.reshape(8, 2))


def test_jit_over_sharded_input(name):
    k = _scale_op(name)
    mesh = Mesh(np.array(jax.devices()[:4]), ("d",))
    x = jax.device_put(X, NamedSharding(mesh, P("d")))
    np.testing.assert_array_equal(jax.jit(_call(k))(x), 2 * X)


def _custom_call_targets(text):
    return sorted(set(re.findall(r"custom_call @([\w.]+)\(", text)))


def _export(name, backend):
    k = _scale_op(name)
    f = jax.jit(_call(k, backend))
    targets = _custom_call_targets(f.lower(X).as_text())
    checks = [jax.export.DisabledSafetyCheck.custom_call(t) for t in targets]
    return k, f, targets, jax.export.export(f, disabled_checks=checks)(X)


def test_export_refuses_numba_targets_without_disabled_checks(name):
    k = _scale_op(name)
    with pytest.raises(
        ValueError, match="Cannot serialize code with custom calls whose targets have no"
    ):
        jax.export.export(jax.jit(_call(k)))(X)


@pytest.mark.parametrize(("backend", "factor"), [("numba", 2), ("jax", 3)])
def test_export_and_call(name, backend, factor):
    _, _, targets, exported = _export(name, backend)
    if backend == "numba":
        assert len(targets) == 1
        assert (targets[0], "cpu") in ffi_core.bridge.registered_targets()
    else:
        assert targets == []
    assert exported.platforms == ("cpu",)
    np.testing.assert_array_equal(exported.call(X), factor * X)


def test_export_keeps_the_backend_chosen_at_export(name):
    k, f, _, exported = _export(name, None)
    k.set_default("cpu", "jax")
    np.testing.assert_array_equal(f(X), 3 * X)
    np.testing.assert_array_equal(exported.call(X), 2 * X)


@pytest.mark.parametrize(("backend", "factor"), [("numba", 2), ("jax", 3)])
def test_export_serialize_round_trip(name, backend, factor):
    _, _, _, exported = _export(name, backend)
    restored = jax.export.deserialize(exported.serialize())
    np.testing.assert_array_equal(restored.call(X), factor * X)
    np.testing.assert_array_equal(jax.jit(restored.call)(X), factor * X)
