"""Warp logs a banner and a line per module it builds; the tests keep it to warnings.

Every test runs with the CPU as JAX's default device: the tests are about the
CPU path (and the GPU path on ffi-core's emulated GPU, which runs on the CPU
too), so on a machine whose default backend is a GPU they still test what they
say instead of running Warp's CUDA build (``block_dim`` 256 by default, the GPU's
compile messages, no bounds checks).
"""

import jax
import pytest
import warp as wp

wp.config.log_level = wp.LOG_WARNING


@pytest.fixture(autouse=True)
def _on_the_cpu():
    # The configuration itself, not `with jax.default_device(...)`: that one is
    # per thread, and some tests call ops from a thread pool.
    saved = jax.config.jax_default_device
    jax.config.update("jax_default_device", jax.devices("cpu")[0])
    try:
        yield
    finally:
        jax.config.update("jax_default_device", saved)
