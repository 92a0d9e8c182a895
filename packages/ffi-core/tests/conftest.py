"""Fixtures shared by the ffi-core tests: the CPU devices and a live FFI API table."""

from __future__ import annotations

import ffi_core
import ffi_core.bridge
import jax
import jax.numpy as jnp
import pytest


@pytest.fixture(scope="session")
def cpu() -> jax.Device:
    """The first CPU device: handlers here are registered for "cpu", so inputs are
    committed to it and the tests run unchanged on a machine with a GPU."""
    return jax.devices("cpu")[0]


@pytest.fixture(scope="session")
def ffi_api(cpu: jax.Device) -> int:
    """The address of XLA's ``XLA_FFI_Api`` table, taken from a real call frame.

    The table is static in jaxlib, so it stays valid after the call and lets
    the error helpers be tested from plain Python.
    """
    seen: list[int] = []

    def grab(frame: ffi_core.abi.CallFrame) -> None:
        seen.append(frame.api)
        (out,) = frame.rets
        out.as_numpy()[...] = 0

    name = ffi_core.bridge.target_name("ffi_core_tests.grab_api", "v1")
    ffi_core.bridge.register_target(
        name, ffi_core.abi.python_handler(grab, name=name), content="v1"
    )
    x = jax.device_put(jnp.zeros((1,), jnp.float32), cpu)
    jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(x.shape, x.dtype))(x).block_until_ready()
    assert seen and seen[0] != 0
    return seen[0]
