"""Kernels with one bytecode that read another global constant or call another
device function get their own digest, hence their own target."""

import types

from numba_cuda_ffi._spec import KernelInfo

SOURCE = """
from numba import cuda

@cuda.jit(device=True)
def helper(v):
    return v * FACTOR

@cuda.jit
def scale(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = SCALE * helper(x[i])
"""


def _digest(scale=2.0, factor=1.0, source=SOURCE):
    module = types.ModuleType("kernels")
    module.__dict__.update(SCALE=scale, FACTOR=factor)
    exec(source, module.__dict__)
    return KernelInfo(module.scale).digest


def test_a_global_constant_and_a_called_device_function_count():
    assert _digest() == _digest()
    assert _digest(scale=3.0) != _digest()  # a global the kernel reads
    assert _digest(factor=5.0) != _digest()  # a global the device function reads
    assert _digest(source=SOURCE.replace("v * FACTOR", "v + FACTOR")) != _digest()  # its code
