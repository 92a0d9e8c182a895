"""Warp kernels with their annotations as objects (no ``from __future__ import
annotations``), as ``warp.jax_kernel`` reads them; for tools/bench_warp_cpu.py."""

import warp as wp


@wp.kernel
def add(
    x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)
):
    i = wp.tid()
    out[i] = x[i] + y[i]
