"""Outputs keep the varying manual axes of their inputs under
``shard_map(..., check_vma=True)``, in every bridge and in ``XLACustomKernel``
(the kit's abstract evaluation): a ``lax.scan`` carry through the call keeps
its type, and its gradient runs."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ffi_core.testing import device_mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

numba = pytest.importorskip("numba")
wp = pytest.importorskip("warp")
import xla_custom_kernel as xck  # noqa: E402
from numba_cpu_ffi import numba_kernel  # noqa: E402
from warp_ffi import warp_kernel  # noqa: E402

N = 16  # per device
S = jax.ShapeDtypeStruct((N,), jnp.float32)


def halve_plus_one(x, out):
    for i in range(x.size):
        out[i] = 0.5 * x[i] + 1.0


@wp.kernel
def warp_halve_plus_one(x: wp.array[float], out: wp.array[float]):
    i = wp.tid()
    out[i] = 0.5 * x[i] + 1.0


def _xck(name: str, backend: str):
    k = xck.XLACustomKernel(re.sub(r"\W", "_", f"vma_{name}"))
    if backend == "numba":
        k.def_numba_kernel(lambda outs: numba.njit(halve_plus_one))
    else:
        k.def_warp_kernel(lambda outs: warp_halve_plus_one)
    return lambda x: k(x, outs=S, backend=backend)


def _ops(name: str):
    return {
        "numba-cpu-ffi": numba_kernel(numba.njit(halve_plus_one), S),
        "warp-ffi": warp_kernel(warp_halve_plus_one, S),
        "XLACustomKernel-numba": _xck(f"{name}_numba", "numba"),
        "XLACustomKernel-warp": _xck(f"{name}_warp", "warp"),
    }


BRIDGES = list(_ops("names"))


@pytest.mark.parametrize("bridge", BRIDGES)
def test_scan_carry_through_the_call_inside_shard_map(request, bridge):
    op = _ops(request.node.name)[bridge]
    mesh = device_mesh((2,), ("r",))
    x = jax.device_put(jnp.arange(2 * N, dtype=jnp.float32), NamedSharding(mesh, P("r")))

    def local(x):
        return jax.lax.scan(lambda c, _: (op(c), None), x, None, length=3)[0]

    sm = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=P("r"), out_specs=P("r"), check_vma=True))
    expected = np.arange(2 * N, dtype=np.float32)
    for _ in range(3):
        expected = 0.5 * expected + 1.0
    np.testing.assert_allclose(sm(x), expected, rtol=1e-6)
    if bridge == "warp-ffi":  # differentiable through Warp's adjoint
        grad = jax.grad(lambda x: sm(x).sum())(x)
        np.testing.assert_allclose(grad, np.full(2 * N, 0.125), rtol=1e-6)
