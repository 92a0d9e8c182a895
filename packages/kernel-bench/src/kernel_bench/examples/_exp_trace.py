"""``exp_trace``: the exponential decay of a synaptic trace plus new spikes."""

from __future__ import annotations

import math
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

__all__ = ["exp_trace"]


def _exp_trace_numba_kg(outs: Any, *, dt: float, tau: float) -> Any:
    # dt and tau are static: the decay is computed once, here, and captured as a
    # constant of the compiled handler (one handler per (dt, tau)). The kernel
    # itself is parallel=True, so small calls run it serially (a serial kernel
    # calling a parallel one would wake threads at every call).
    decay = np.float32(math.exp(-dt / tau))

    @numba.njit(parallel=True, fastmath=True)
    @stable_ffi_name
    def kernel(trace, spikes, out):
        for i in numba.prange(trace.size):
            out[i] = trace[i] * decay + spikes[i]

    return numba_kernel(kernel, outs)


exp_trace = XLACustomKernel(
    f"{NAMESPACE}exp_trace", doc="Exponential trace update: trace * exp(-dt / tau) + spikes."
)
exp_trace.def_tags("example", "elementwise", "snn")
exp_trace.def_sharding_rule("elementwise")
exp_trace.def_numba_kernel(_exp_trace_numba_kg)
exp_trace.def_jax_kernel(
    lambda outs, dt, tau: (
        lambda trace, spikes: trace * jnp.exp(-dt / tau).astype(trace.dtype) + spikes
    )
)
exp_trace.def_jvp_rule2(
    lambda t, trace, spikes, outs, dt, tau: t * jnp.exp(-dt / tau).astype(t.dtype),
    lambda t, trace, spikes, outs, dt, tau: t,
)


@exp_trace.def_call
def _exp_trace_call(
    trace: jax.Array, spikes: jax.Array, *, dt: float = 0.1, tau: float = 10.0
) -> jax.Array:
    check_vectors("exp_trace", trace=trace, spikes=spikes)
    return exp_trace(
        trace, spikes, outs=jax.ShapeDtypeStruct(trace.shape, trace.dtype), dt=dt, tau=tau
    )


@exp_trace.def_benchmark_data
def _exp_trace_data(*, platform: str) -> Iterator[BenchmarkConfig]:
    rng = np.random.default_rng(1)
    for n in sizes([10_000], [10_000, 1_000_000], [10_000, 1_000_000, 10_000_000]):
        trace = rng.random(n, dtype=np.float32)
        spikes = (rng.random(n) < 0.02).astype(np.float32)
        yield config(f"n={n:.0e}", (trace, spikes), {"dt": 0.1, "tau": 10.0}, n=n)
