"""Shared fixtures: a fake XLA call frame and fake CUDA driver entry points.

The native handler is real compiled code; on a machine without a GPU it is run
against a call frame built with ctypes and driver functions that record what
they are given (ffi-core's launcher harness), so the parameter packing is
checked byte for byte.
"""

from __future__ import annotations

import pytest
from ffi_core.bridge.cuda.testing import FakeDriver, FakeXLA


def cuda_available() -> bool:
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


#: For GPU tests: they run unchanged where numba-cuda sees a GPU.
needs_gpu = pytest.mark.skipif(
    not cuda_available(), reason="needs an NVIDIA GPU (numba.cuda.is_available() is False)"
)


@pytest.fixture
def fake_xla() -> FakeXLA:
    return FakeXLA()


@pytest.fixture
def fake_driver() -> type[FakeDriver]:
    return FakeDriver
