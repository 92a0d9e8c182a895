"""Beside a neighbour library that changes process-wide ctypes state.

A library in the user's process may give ``ctypes.pythonapi.PyCapsule_New``
its own prototype (brainevent does). That object is shared by every library in
the process, so nothing here may rely on, or change, its prototype: with a
neighbour's prototype set after our import every call raised ArgumentError, and
set before, the process crashed at the first default-vmap call. Each order runs
in a fresh process, since the crash took the process down.
"""

import os
import subprocess
import sys

import pytest

_PROGRAM = r"""
import ctypes, sys

def neighbour():
    # What another library does: its own prototype on the shared object.
    f = ctypes.pythonapi.PyCapsule_New
    f.restype = ctypes.py_object
    f.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.CFUNCTYPE(None, ctypes.py_object)]

if sys.argv[1] == "before":
    neighbour()
import jax, jax.numpy as jnp, numba, numpy as np
import xla_custom_kernel as xck
from numba_cpu_ffi import numba_kernel
from numba_cpu_ffi._spec import VMAP_METHODS
if sys.argv[1] == "after":
    neighbour()

@numba.njit
def add(x, y, out):  # any rank: expand_dims and broadcast_all pass the batch axis
    # A loop over the flat arrays: Numba compiles it in a fraction of the time
    # that ``out[:] = x + y`` (broadcasting, its error messages) takes.
    a, b, o = x.reshape(-1), y.reshape(-1), out.reshape(-1)
    for i in range(o.size):
        o[i] = a[i] + b[i]

x = np.arange(64 * 1000, dtype=np.float32).reshape(64, 1000)
y = np.ones((64, 1000), np.float32)
for method in VMAP_METHODS:
    op = numba_kernel(add, jax.ShapeDtypeStruct((1000,), jnp.float32), vmap_method=method)
    np.testing.assert_array_equal(jax.jit(op)(x[0], y[0]), x[0] + 1)
    np.testing.assert_array_equal(op(x[0], y[0]), x[0] + 1)
    np.testing.assert_array_equal(jax.jit(jax.vmap(op))(x, y), x + 1)

@numba.njit
def scale(x, out):
    for i in range(x.size):
        out[i] = 3 * x[i]

k = xck.XLACustomKernel("neighbour_scale")
k.def_numba_kernel(lambda outs: scale)
k.def_jvp_rule2(lambda t, x, outs: k(t, outs=outs))
k.def_transpose_rule(lambda cts, x, outs: [k(cts[0], outs=outs)])
call = lambda v: k(v, outs=jax.ShapeDtypeStruct(v.shape, v.dtype))
np.testing.assert_array_equal(jax.jit(jax.grad(lambda v: call(v).sum()))(x[0]), np.full(1000, 3.0))

devices = jax.devices("cpu")[:4]
mesh = jax.sharding.Mesh(np.array(devices), ("d",))
spec = jax.sharding.PartitionSpec("d")
op = numba_kernel(add, jax.ShapeDtypeStruct((250,), jnp.float32))
f = jax.jit(jax.shard_map(op, mesh=mesh, in_specs=(spec, spec), out_specs=spec))
np.testing.assert_array_equal(f(x[0], y[0]), x[0] + 1)

# The neighbour's own calls still work with its prototype.
destructor = ctypes.CFUNCTYPE(None, ctypes.py_object)(0)  # none, as jax.ffi.pycapsule does
buffer = ctypes.create_string_buffer(8)
capsule = ctypes.pythonapi.PyCapsule_New(ctypes.addressof(buffer), b"neighbour", destructor)
assert type(capsule).__name__ == "PyCapsule"
del capsule
print("ok")
"""


@pytest.mark.parametrize("order", ["before", "after"])
def test_a_neighbour_that_sets_the_shared_capsule_prototype(order):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    result = subprocess.run(
        [sys.executable, "-c", _PROGRAM, order],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


_WARP_PROGRAM = r"""
import ctypes, sys

def neighbour():
    f = ctypes.pythonapi.PyCapsule_New
    f.restype = ctypes.py_object
    f.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.CFUNCTYPE(None, ctypes.py_object)]

if sys.argv[1] == "before":
    neighbour()
import jax, jax.numpy as jnp, numba, numpy as np, warp as wp
from numba_cpu_ffi import numba_kernel
from warp_ffi import warp_kernel
if sys.argv[1] == "after":
    neighbour()
wp.config.log_level = wp.LOG_WARNING

@wp.kernel
def wp_scale(x: wp.array(dtype=float), k: float, out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = k * x[i]

@numba.njit
def nb_add(x, y, out):  # a loop: quicker to compile than ``out[:] = x + y``
    for i in range(x.size):
        out[i] = x[i] + y[i]

x = np.arange(1000, dtype=np.float32)
w = warp_kernel(wp_scale, jax.ShapeDtypeStruct(x.shape, x.dtype))
n = numba_kernel(nb_add, jax.ShapeDtypeStruct(x.shape, x.dtype))
f = jax.jit(lambda x: n(w(x, k=2.0), x))  # both bridges in one program
np.testing.assert_array_equal(f(x), 3 * x)
np.testing.assert_array_equal(jax.jit(jax.vmap(lambda r: w(r, k=2.0)))(np.stack([x, x])), 2 * np.stack([x, x]))
np.testing.assert_array_equal(jax.grad(lambda v: w(v, k=2.0).sum())(x), np.full(1000, 2.0))

# Warp's own launches in the same process are unaffected.
a = wp.array(x, device="cpu")
o = wp.zeros(1000, dtype=float, device="cpu")
wp.launch(wp_scale, dim=1000, inputs=[a, 4.0], outputs=[o], device="cpu")
np.testing.assert_array_equal(o.numpy(), 4 * x)
np.testing.assert_array_equal(f(x + 1), 3 * (x + 1))
print("ok")
"""


@pytest.mark.parametrize("order", ["before", "after"])
def test_warp_beside_the_neighbour_numba_and_warp_itself(order, tmp_path):
    pytest.importorskip("warp_ffi")
    program = tmp_path / "warp_neighbours.py"  # Warp reads a kernel's source from its file
    program.write_text(_WARP_PROGRAM)
    result = subprocess.run(
        [sys.executable, str(program), order],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")
