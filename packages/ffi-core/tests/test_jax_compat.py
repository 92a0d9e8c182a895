"""ffi_core._jax_compat on the installed JAX: each CI leg runs these against its own
jax, so a release that moves the private API behind them fails here first."""

from __future__ import annotations

import itertools

import ffi_core
import ffi_core.bridge
import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
import pytest
from jax.extend.core import Primitive
from jax.interpreters import mlir

_names = itertools.count()


def _toy(*, eager: bool = True) -> tuple[Primitive, list[int]]:
    """A fresh primitive ``(x + k, x * k)`` shaped like the bridges' (multiple
    results, a static parameter), and a list that counts its lowerings."""
    prim = Primitive(f"ffi_core_test_toy_{next(_names)}")
    prim.multiple_results = True
    lowerings = [0]
    prim.def_abstract_eval(lambda x, *, k: [x, x])
    lower = mlir.lower_fun(lambda x, *, k: [x + k, x * k], multiple_results=True)

    def lowering(ctx, x, *, k):
        lowerings[0] += 1
        return lower(ctx, x, k=k)

    mlir.register_lowering(prim, lowering)
    if eager:
        ffi_core.bridge.def_eager_impl(prim)
    return prim, lowerings


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2])


@pytest.mark.parametrize("version", [jax.__version__], ids=lambda v: f"jax-{v}")
def test_records_jax_version(version: str, record_property) -> None:
    # The test id carries the version, so every leg's report says which jax it ran on.
    record_property("jax_version", version)
    record_property("jaxlib_version", jaxlib.__version__)
    # ffi-core requires jax>=0.10 and jaxlib>=0.10.
    assert _release(version) >= (0, 10)
    assert _release(jaxlib.__version__) >= (0, 10)


def test_eager_impl_is_jax_dispatch() -> None:
    # The module docstring says the re-export is JAX's own eager path; hold it to that.
    from jax._src import dispatch
    from jax.interpreters import xla

    assert xla.apply_primitive is dispatch.apply_primitive


def test_eager_call_runs() -> None:
    prim, _ = _toy()
    x = jnp.arange(4, dtype=jnp.float32)
    plus, times = prim.bind(x, k=3)
    np.testing.assert_array_equal(plus, x + 3)
    np.testing.assert_array_equal(times, x * 3)


def test_without_eager_impl_eager_call_fails() -> None:
    # What def_eager_impl supplies: JAX has no eager rule for a new primitive.
    prim, _ = _toy(eager=False)
    with pytest.raises(NotImplementedError, match=prim.name):
        prim.bind(jnp.arange(4, dtype=jnp.float32), k=3)


def test_eager_call_compiles_once_per_shape_and_dtype() -> None:
    prim, lowerings = _toy()
    f32_3 = jnp.arange(3, dtype=jnp.float32)
    prim.bind(f32_3, k=2)
    prim.bind(f32_3 + 1, k=2)
    assert lowerings[0] == 1
    prim.bind(jnp.arange(4, dtype=jnp.float32), k=2)
    assert lowerings[0] == 2
    prim.bind(jnp.arange(3, dtype=jnp.int32), k=2)
    assert lowerings[0] == 3
    prim.bind(f32_3, k=2)
    assert lowerings[0] == 3


def test_eager_call_compiles_once_per_parameters() -> None:
    prim, lowerings = _toy()
    x = jnp.arange(3, dtype=jnp.float32)
    prim.bind(x, k=2)
    prim.bind(x, k=5)
    assert lowerings[0] == 2
    (plus, _) = prim.bind(x, k=5)
    assert lowerings[0] == 2
    np.testing.assert_array_equal(plus, x + 5)


def test_works_under_jit() -> None:
    prim, lowerings = _toy()
    x = jnp.arange(3, dtype=jnp.float32)
    f = jax.jit(lambda x: prim.bind(2 * x, k=1))
    plus, times = f(x)
    f(x)
    np.testing.assert_array_equal(plus, 2 * x + 1)
    np.testing.assert_array_equal(times, 2 * x)
    assert lowerings[0] == 1


def test_works_under_disable_jit() -> None:
    # A public-only stand-in (a cached jax.jit of a bind lambda) recurses here:
    # with jit disabled the jitted function calls bind, which calls the impl again.
    prim, _ = _toy()
    x = jnp.arange(3, dtype=jnp.float32)
    with jax.disable_jit():
        plus, times = prim.bind(x, k=4)
    np.testing.assert_array_equal(plus, x + 4)
    np.testing.assert_array_equal(times, x * 4)


@pytest.mark.parametrize("prim", [None, "numba_kernel_call", jax.jit])
def test_rejects_non_primitive(prim: object) -> None:
    with pytest.raises(TypeError, match=r"`prim` must be a jax\.extend\.core\.Primitive"):
        ffi_core.bridge.def_eager_impl(prim)  # type: ignore[arg-type]


def test_distributed_client_is_none_in_a_single_process_program():
    from ffi_core._jax_compat import distributed_client

    assert jax.process_count() == 1
    assert distributed_client() is None


def test_distributed_client_reads_jax_distributed_state(monkeypatch):
    # Where JAX keeps the client today; a release that moves it fails here.
    from ffi_core._jax_compat import distributed_client
    from jax._src import distributed

    client = object()
    monkeypatch.setattr(distributed.global_state, "client", client)
    assert distributed_client() is client


# ------------------------------------------- varying manual axes (shard_map's check_vma)


def _bridge_double() -> Primitive:
    """A bridge primitive (the kit's rules) whose lowering doubles its input."""
    from ffi_core.bridge import bridge_primitive

    prim = bridge_primitive(f"ffi_core_test_vma_{next(_names)}", describe=lambda p: "kernel 'x2'")
    lower = mlir.lower_fun(lambda x, **params: [2 * x], multiple_results=True)
    mlir.register_lowering(prim, lower)
    return prim


def _bind(prim: Primitive, x: jax.Array) -> jax.Array:
    aval = jax.core.ShapedArray(x.shape, x.dtype)
    (out,) = prim.bind(x, out_avals=(aval,), aliases=(), vmap_method=None, batched=None)
    return out


def test_bridge_outputs_vary_along_the_inputs_manual_axes() -> None:
    from ffi_core.testing import device_mesh
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    prim = _bridge_double()
    mesh = device_mesh((2,), ("r",))
    x = jax.device_put(jnp.arange(8.0, dtype=jnp.float32), NamedSharding(mesh, P("r")))
    seen = []

    def local(x):
        seen.append((_jax_compat_varying(x), _jax_compat_varying(_bind(prim, x))))
        # A scan carry through the call must keep its type.
        return jax.lax.scan(lambda c, _: (_bind(prim, c), None), x, None, length=3)[0]

    sm = jax.shard_map(local, mesh=mesh, in_specs=P("r"), out_specs=P("r"), check_vma=True)
    np.testing.assert_array_equal(jax.jit(sm)(x), 8 * np.arange(8.0))
    assert seen == [(frozenset({"r"}), frozenset({"r"}))]
    # Outside shard_map nothing varies: the declared avals come back as they are.
    out = jax.core.ShapedArray((3,), np.float32)
    assert ffi_core._jax_compat.with_varying_axes([out], [out]) == [out]


def test_outputs_vary_along_the_union_of_the_inputs_axes() -> None:
    from ffi_core._jax_compat import with_varying_axes
    from ffi_core.testing import device_mesh
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = device_mesh((2, 2), ("a", "b"))
    x = jax.device_put(jnp.zeros((4, 4), jnp.float32), NamedSharding(mesh, P("a", "b")))
    seen = []

    def local(x):
        rows, cols = x.sum(1), x.sum(0)  # varying along {a, b}; reductions keep both
        row_only = jax.lax.psum(rows, "b")  # varies along a only
        col_only = jax.lax.psum(cols, "a")  # varies along b only
        out = jax.core.ShapedArray((2,), np.float32)
        (both,) = with_varying_axes([out], [jax.typeof(row_only), jax.typeof(col_only)])
        (one,) = with_varying_axes([out], [jax.typeof(row_only)])
        seen.append((_jax_compat_varying(both), _jax_compat_varying(one)))
        return x

    jax.jit(
        jax.shard_map(local, mesh=mesh, in_specs=P("a", "b"), out_specs=P("a", "b"), check_vma=True)
    )(x)
    assert seen == [(frozenset({"a", "b"}), frozenset({"a"}))]


def _jax_compat_varying(x) -> frozenset:
    # Either spelling of the varying axes (see ffi_core._jax_compat).
    aval = x if isinstance(x, jax.core.ShapedArray) else jax.typeof(x)
    return ffi_core._jax_compat._varying(aval)
