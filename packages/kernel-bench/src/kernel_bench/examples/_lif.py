"""``lif_step``: one Euler step of leaky integrate-and-fire neurons, an example
with two outputs of different dtypes (potentials and spikes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numba
import numpy as np
from numba_cpu_ffi import numba_kernel
from xla_custom_kernel import XLACustomKernel

from .._config import BenchmarkConfig
from ._common import NAMESPACE, check_vectors, config, stable_ffi_name
from ._scale import sizes

try:
    from . import _warp_kernels
except ImportError:  # warp-ffi is optional (kernel-bench[warp]): no warp backend without it
    _warp_kernels = None  # type: ignore[assignment]

__all__ = ["lif_step"]


def _lif_numba_kg(outs: Any, *, dt: float, tau: float, v_th: float, v_reset: float) -> Any:
    alpha = np.float32(dt / tau)
    th, reset = np.float32(v_th), np.float32(v_reset)

    @numba.njit(parallel=True, fastmath=True)
    @stable_ffi_name
    def lif(v, i_ext, v_out, spike):
        for k in numba.prange(v.size):
            x = v[k] + alpha * (i_ext[k] - v[k])
            fired = x >= th
            spike[k] = fired
            v_out[k] = reset if fired else x

    return numba_kernel(lif, outs)


def _lif_jax(v, i_ext, *, dt, tau, v_th, v_reset):
    x = v + jnp.asarray(dt / tau, v.dtype) * (i_ext - v)
    spike = x >= v_th
    return jnp.where(spike, jnp.asarray(v_reset, v.dtype), x), spike


lif_step = XLACustomKernel(
    f"{NAMESPACE}lif_step",
    doc="One Euler step of leaky integrate-and-fire neurons: (new potentials, spikes).",
)
lif_step.def_tags("example", "snn")
lif_step.def_sharding_rule("elementwise")
lif_step.def_numba_kernel(_lif_numba_kg)
lif_step.def_jax_kernel(
    lambda outs, dt, tau, v_th, v_reset: (
        lambda v, i: _lif_jax(v, i, dt=dt, tau=tau, v_th=v_th, v_reset=v_reset)
    )
)
if _warp_kernels is not None:
    # The adapter passes the static dt, tau, v_th, v_reset to the kernel's parameters.
    lif_step.def_warp_kernel(lambda outs, **static: _warp_kernels.lif_step_kernel)


@lif_step.def_call
def _lif_call(v, i_ext, *, dt=0.1, tau=10.0, v_th=1.0, v_reset=0.0):
    check_vectors("lif_step", v=v, i_ext=i_ext)
    outs = (jax.ShapeDtypeStruct(v.shape, v.dtype), jax.ShapeDtypeStruct(v.shape, jnp.bool_))
    return lif_step(v, i_ext, outs=outs, dt=dt, tau=tau, v_th=v_th, v_reset=v_reset)


@lif_step.def_benchmark_data
def _lif_data(*, platform: str) -> Iterator[BenchmarkConfig]:
    rng = np.random.default_rng(6)
    for n in sizes([10_000], [10_000, 100_000, 1_000_000], [10_000, 1_000_000, 10_000_000]):
        v = rng.random(n, dtype=np.float32)
        i_ext = (1.5 * rng.random(n)).astype(np.float32)
        kw = {"dt": 0.1, "tau": 10.0, "v_th": 1.0, "v_reset": 0.0}
        yield config(f"n={n:.0e}", (v, i_ext), kw, n=n)
