"""A module of Warp kernels executed again (importlib.reload, a notebook cell
run twice) with a changed @wp.func: calls take the new code, and handlers made
before keep working (Warp unloads the old module; the bridge keeps its code)."""

from __future__ import annotations

import importlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import warp as wp

SOURCE = """
import warp as wp

@wp.func
def f(x: float):
    return x * FACTOR

@wp.kernel
def apply(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = f(x[i])
"""


def test_reload_with_a_changed_function(tmp_path, monkeypatch):
    from warp_ffi import warp_kernel

    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "reloaded_kernels.py"
    path.write_text(SOURCE.replace("FACTOR", "2.0"))
    module = importlib.import_module("reloaded_kernels")
    try:
        x = jnp.arange(5, dtype=jnp.float32)
        first = jax.jit(warp_kernel(module.apply, jax.ShapeDtypeStruct(x.shape, x.dtype)))
        np.testing.assert_array_equal(first(x), 2 * np.asarray(x))

        path.write_text(SOURCE.replace("FACTOR", "3.0"))  # the kernel's own code is the same
        module = importlib.reload(module)
        second = jax.jit(warp_kernel(module.apply, jax.ShapeDtypeStruct(x.shape, x.dtype)))
        np.testing.assert_array_equal(second(x), 3 * np.asarray(x))
        np.testing.assert_array_equal(first(x + 1), 2 * np.asarray(x + 1))  # still its own code
        assert isinstance(module.apply, wp.Kernel)
    finally:
        sys.modules.pop("reloaded_kernels", None)
