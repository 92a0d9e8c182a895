"""Kernels with one text that read another global constant, in two modules,
run their own code on the CPU (Warp's code hash and the Python digest differ)."""

from __future__ import annotations

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np

SOURCE = """
import warp as wp

SCALE = wp.constant({scale})


@wp.kernel
def scale(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = SCALE * x[i]
"""


def _module(tmp_path, name, scale):
    path = tmp_path / f"{name}.py"
    path.write_text(SOURCE.format(scale=scale))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_kernels_differing_in_a_global_constant_run_their_own_code(tmp_path):
    from warp_ffi import warp_kernel
    from warp_ffi._spec import KernelInfo

    x = jnp.arange(4, dtype=jnp.float32)
    first = _module(tmp_path, "warp_scale_first", 2.0)
    second = _module(tmp_path, "warp_scale_second", 3.0)
    assert KernelInfo(first.scale).digest != KernelInfo(second.scale).digest
    for module, factor in ((first, 2), (second, 3)):
        op = jax.jit(warp_kernel(module.scale, jax.ShapeDtypeStruct(x.shape, x.dtype)))
        np.testing.assert_array_equal(op(x), factor * np.asarray(x))
