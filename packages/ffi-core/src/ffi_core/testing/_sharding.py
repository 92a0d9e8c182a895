"""Meshes and compiled-HLO checks for the tests of sharded kernel calls."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["custom_calls", "device_mesh"]


def device_mesh(shape: tuple[int, ...], axis_names: tuple[str, ...]) -> Any:
    """A ``jax.sharding.Mesh`` of ``shape`` over JAX's first CPU devices
    (several where the tests ask XLA for them), whatever JAX's default backend
    is: on a machine with one GPU, the CPU still has the devices a mesh needs.

    Example:
        >>> mesh = device_mesh((1,), ("d",))
        >>> dict(mesh.shape)
        {'d': 1}

    Raises:
        ValueError: JAX has fewer CPU devices than ``shape`` needs.
    """
    import jax
    import numpy as np

    needed = math.prod(shape)
    devices = jax.devices("cpu")
    if len(devices) < needed:
        raise ValueError(
            f"a mesh of shape {shape} needs {needed} devices, but JAX has {len(devices)} "
            "CPU devices; "
            f"run with XLA_FLAGS=--xla_force_host_platform_device_count={needed}"
        )
    return jax.sharding.Mesh(np.array(devices[:needed]).reshape(shape), axis_names)


def custom_calls(hlo: str, target_prefix: str) -> list[str]:
    """The lines of HLO text ``hlo`` (a compiled function's ``as_text()``) that
    call an FFI target whose name starts with ``target_prefix``.

    Example:
        >>> hlo = 'a = f32[4] custom-call(x), custom_call_target="numba_cpu.add_0"\\nb = f32[4] add(a, a)'
        >>> len(custom_calls(hlo, "numba_cpu."))
        1
    """
    return [line for line in hlo.splitlines() if f'custom_call_target="{target_prefix}' in line]
