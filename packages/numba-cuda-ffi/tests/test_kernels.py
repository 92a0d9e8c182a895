"""Kernels and callables under jit, vmap, scan, aliases and shard_map: one set of
test bodies, run on a real GPU (skipped where numba-cuda sees none) and on the
CPU with only the GPU emulated (everywhere).

Emulated, everything that runs on a GPU machine runs unchanged up to the driver:
the public wrapper, the batching rules, the lowering, the kernel compiled to
PTX and checked against Numba's ABI, the generated native handler with its
buffer checks and parameter packing. Only three things are stand-ins: JAX
places the call on its CPU (the CUDA lowering is registered for the CPU
platform, and the call frame's stream comes from a patched API table), module
loading is a table, and ``cuLaunchKernel`` runs the kernel's Python source in
numba-cuda's simulator over the arrays the handler packed. A wrong data
pointer, shape, stride, batch offset, grid or block therefore gives a wrong
result here, as it would on a GPU. What only the emulation can see (the grid,
block and stream of each launch) is checked where the device is emulated.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

import ffi_core
import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from ffi_core.bridge.cuda.testing import (
    EMULATED_STREAM,
    EmulatedDevice,
    EmulatedGPU,
    EmulatedLaunch,
    emulate,
    host_array,
)
from ffi_core.bridge.cuda.testing import (
    register_on_cpu as emulated_register,
)
from jax import lax
from numba import cuda
from numba.cuda.simulator.kernel import FakeCUDAKernel
from numba_cuda_ffi import _primitive, _target, numba_cuda_kernel
from numba_cuda_ffi._compile import compile_kernel, param_layout

S = jax.ShapeDtypeStruct
F32 = np.float32
FAKE_STREAM = EMULATED_STREAM


def _simulate(py_func: Any, arrays: tuple[Any, ...], launch: EmulatedLaunch) -> None:
    """Run ``py_func`` in numba-cuda's simulator on the arrays the handler
    packed as Numba's array structs (checked field by field)."""
    layout = param_layout(arrays)
    fields: dict[int, dict[str, Any]] = {}
    for slot, value in zip(layout, launch.params, strict=True):
        entry = fields.setdefault(slot.array, {"shape": [], "strides": []})
        if slot.field in ("shape", "strides"):
            entry[slot.field].append(value)
        else:
            entry[slot.field] = value
    views = []
    for k, arr in enumerate(arrays):
        a, dtype = fields[k], np.dtype(arr.dtype)
        assert (a["meminfo"], a["parent"]) == (0, 0)
        assert a["itemsize"] == dtype.itemsize
        assert a["nitems"] == int(np.prod(a["shape"], dtype=np.int64))
        views.append(host_array(a["data"], dtype, a["shape"], tuple(a["strides"])))
    kernel = FakeCUDAKernel(py_func, device=False)
    kernel[launch.grid, launch.block, 0, launch.shared_mem](*views)


_GPU = EmulatedGPU()  # one per process: the handlers compile its entry points in
_EMULATED_HANDLERS = _GPU.handlers  # the launcher's handler cache while emulated


class RealGPU:
    """The machine's GPU: launches are not observed."""

    emulated = False
    # The GPU may contract a * x + y into one fused multiply-add, which NumPy
    # rounds twice; results near zero then differ by more than rtol allows.
    atol = 1e-6


@pytest.fixture
def real_gpu():
    if not cuda.is_available():
        pytest.skip("needs an NVIDIA GPU (numba.cuda.is_available() is False)")
    return RealGPU()


@pytest.fixture(params=["emulated", "gpu"])
def device(request):
    """Each test twice: on the GPU emulated on the CPU, and on a real GPU."""
    return request.getfixturevalue("emulated" if request.param == "emulated" else "real_gpu")


@pytest.fixture
def emulated(monkeypatch):
    """Lower the CUDA path for the CPU and launch kernels in the simulator."""

    def compile_and_note(info, arrays, cc):
        compiled = compile_kernel(info, arrays, cc)  # the real compile and ABI check
        _GPU.define(
            compiled.entry,
            (8,) * len(compiled.layout),
            lambda launch: _simulate(info.py_func, arrays, launch),
        )
        return compiled

    monkeypatch.setattr(_target, "compile_kernel", compile_and_note)
    _GPU.devices = (EmulatedDevice(),)
    _GPU.atol = 0.0  # the simulator computes with NumPy: results match NumPy's rounding
    lowering = (
        _primitive.numba_cuda_call_p,
        _primitive._numba_cuda_call_lowering,
        _primitive._numba_cuda_call_cpu_lowering,
    )
    with emulate(_GPU, [lowering]):
        yield _GPU


# ------------------------------------------------------------------ kernels


@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[()] * x[i] + y[i]


@cuda.jit
def add(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit
def add2d(x, y, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = x[i, j] + y[i, j]


@cuda.jit
def scale3d(x, out):
    i, j, k = cuda.grid(3)
    if i < out.shape[0] and j < out.shape[1] and k < out.shape[2]:
        out[i, j, k] = 2 * x[i, j, k]


@cuda.jit
def split(x, hi, lo):  # a dict's outputs come in key order
    i = cuda.grid(1)
    if i < x.size:
        lo[i] = min(x[i], 0)
        hi[i] = max(x[i], 0)


@cuda.jit
def increment(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += 1


@cuda.jit
def cumsum_rows(x, out):
    # Couples a whole row: one thread per row.
    r = cuda.grid(1)
    if r < out.shape[0]:
        acc = 0.0
        for j in range(out.shape[1]):
            acc += x[r, j]
            out[r, j] = acc


@cuda.jit
def block_sums(x, out):
    # Dynamic shared memory: each block sums its slice of x.
    buf = cuda.shared.array(0, dtype=numba.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = x[i] if i < x.size else 0
    cuda.syncthreads()
    if t == 0:
        acc = 0.0
        for s in range(cuda.blockDim.x):
            acc += buf[s]
        out[cuda.blockIdx.x] = acc


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(F32)


# -------------------------------------------------------------------- tests


@pytest.mark.parametrize("jit", [False, True])
def test_elementwise(device, jit):
    n = 37
    op = numba_cuda_kernel(axpy, S((n,), jnp.float32), launch_dims=n, threads_per_block=16)
    a, x, y = np.array(3.0, F32), _rand(n), _rand(n, seed=1)
    out = (jax.jit(op) if jit else op)(a, x, y)
    np.testing.assert_allclose(out, 3 * x + y, rtol=1e-6, atol=device.atol)
    if device.emulated:
        assert device.launches[-1] == ((3, 1, 1), (16, 1, 1), 0, FAKE_STREAM)


def test_2d_and_3d(device):
    x, y = _rand(5, 9), _rand(5, 9, seed=1)
    op2 = numba_cuda_kernel(add2d, S((5, 9), jnp.float32), launch_dims=(5, 9))
    np.testing.assert_allclose(jax.jit(op2)(x, y), x + y, rtol=1e-6)
    z = _rand(3, 4, 5)
    op3 = numba_cuda_kernel(scale3d, S(z.shape, jnp.float32), grid=(1, 2, 3), block=(4, 2, 2))
    np.testing.assert_allclose(jax.jit(op3)(z), 2 * z, rtol=1e-6)
    if device.emulated:
        assert device.launches[-1][:2] == ((1, 2, 3), (4, 2, 2))


def test_shared_memory(device):
    x = _rand(20)
    op = numba_cuda_kernel(block_sums, S((3,), jnp.float32), grid=3, block=8, shared_mem=8 * 4)
    expected = [x[0:8].sum(), x[8:16].sum(), x[16:20].sum()]
    np.testing.assert_allclose(jax.jit(op)(x), expected, rtol=1e-5)
    if device.emulated:
        assert device.launches[-1][2] == 32


def test_multiple_outputs_as_a_pytree(device):
    x = _rand(11)
    spec = S((11,), jnp.float32)
    op = numba_cuda_kernel(split, {"lo": spec, "hi": spec}, launch_dims=11)
    out = jax.jit(op)(x)
    np.testing.assert_array_equal(out["lo"], np.minimum(x, 0))
    np.testing.assert_array_equal(out["hi"], np.maximum(x, 0))
    # A sequence keeps its order.
    hi, lo = jax.jit(numba_cuda_kernel(split, [spec, spec], launch_dims=11))(x)
    np.testing.assert_array_equal(lo, np.minimum(x, 0))
    np.testing.assert_array_equal(hi, np.maximum(x, 0))


def test_aliases_update_in_place(device):
    # The output is the aliased input's buffer: the kernel sees its values.
    op = numba_cuda_kernel(
        increment, S((6,), jnp.float32), launch_dims=6, input_output_aliases={0: 0}
    )
    x = jnp.arange(6, dtype=jnp.float32)
    out = jax.jit(op, donate_argnums=0)(jnp.array(x))
    np.testing.assert_array_equal(out, np.arange(6) + 1)
    np.testing.assert_array_equal(jax.jit(lambda v: op(op(v)))(x), np.arange(6) + 2)
    # Without donation XLA copies the input first: it keeps its values.
    np.testing.assert_array_equal(jax.jit(op)(x), np.arange(6) + 1)
    np.testing.assert_array_equal(x, np.arange(6))


def test_zero_size_output_skips_the_launch(device):
    op = numba_cuda_kernel(axpy, S((0,), jnp.float32), launch_dims=1)
    out = jax.jit(op)(np.array(1.0, F32), np.zeros(0, F32), np.zeros(0, F32))
    assert out.shape == (0,)
    op2 = numba_cuda_kernel(add2d, S((0, 5), jnp.float32), launch_dims=(1, 5))
    assert jax.jit(op2)(np.zeros((0, 5), F32), np.zeros((0, 5), F32)).shape == (0, 5)
    if device.emulated:
        assert device.launches == []


def _take(a, axis, i):
    return a if axis is None else np.take(a, i, axis=axis)


@pytest.mark.parametrize("method", [None, "sequential", "sequential_unrolled", "fold"])
@pytest.mark.parametrize("in_axes", [(0, 0), (1, None), (None, 1)])
def test_vmap(device, method, in_axes):
    n, b = 10, 3
    op = numba_cuda_kernel(
        add, S((n,), jnp.float32), launch_dims=n, threads_per_block=8, vmap_method=method
    )
    shapes = {None: (n,), 0: (b, n), 1: (n, b)}
    x, y = _rand(*shapes[in_axes[0]]), _rand(*shapes[in_axes[1]], seed=1)
    out = jax.jit(jax.vmap(op, in_axes=in_axes))(x, y)
    expected = [_take(x, in_axes[0], i) + _take(y, in_axes[1], i) for i in range(b)]
    np.testing.assert_allclose(out, np.stack(expected), rtol=1e-6)
    if not device.emulated:
        return
    grids = [launch[0] for launch in device.launches]
    if method == "fold":
        # One launch over the batch folded into axis 0: axis x scaled by it.
        assert grids == [(4, 1, 1)]
    else:
        # One launch per batch element with the unbatched grid (for None,
        # all from one native call).
        assert grids == [(2, 1, 1)] * b


@cuda.jit
def add_batched(x, y, out):
    # For vmap_method "expand_dims"/"broadcast_all": every array has the batch
    # in front; an unbatched input has an axis of 1 there (expand_dims).
    i = cuda.grid(1)
    if i < out.shape[1]:
        for b in range(out.shape[0]):
            out[b, i] = x[min(b, x.shape[0] - 1), i] + y[min(b, y.shape[0] - 1), i]


@pytest.mark.parametrize("method", ["expand_dims", "broadcast_all"])
@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 1)])
def test_vmap_methods_that_pass_the_batch_axis(device, method, in_axes):
    n, b = 10, 3
    op = numba_cuda_kernel(add_batched, S((n,), jnp.float32), launch_dims=n, vmap_method=method)
    shapes = {None: (n,), 0: (b, n), 1: (n, b)}
    x, y = _rand(*shapes[in_axes[0]]), _rand(*shapes[in_axes[1]], seed=1)
    out = jax.jit(jax.vmap(op, in_axes=in_axes))(x, y)
    expected = [_take(x, in_axes[0], i) + _take(y, in_axes[1], i) for i in range(b)]
    np.testing.assert_allclose(out, np.stack(expected), rtol=1e-6)
    if device.emulated:  # one launch for the whole batch, with the launch given
        assert [launch[0] for launch in device.launches] == [(1, 1, 1)]


def test_vmap_with_a_batched_scalar(device):
    op = numba_cuda_kernel(axpy, S((5,), jnp.float32), launch_dims=5)
    a, x, y = np.arange(1, 4, dtype=F32), _rand(5), _rand(3, 5, seed=1)
    out = jax.jit(jax.vmap(op, in_axes=(0, None, 0)))(a, x, y)
    np.testing.assert_allclose(out, a[:, None] * x + y, rtol=1e-6, atol=device.atol)


def test_nested_vmap_is_one_call_per_element(device):
    op = numba_cuda_kernel(add2d, S((2, 3), jnp.float32), launch_dims=(2, 3))
    x, y = _rand(4, 5, 2, 3), _rand(5, 2, 3, seed=1)
    f = jax.vmap(jax.vmap(op, in_axes=(0, 0)), in_axes=(0, None))
    np.testing.assert_allclose(jax.jit(f)(x, y), x + y[None], rtol=1e-6)
    if device.emulated:
        assert len(device.launches) == 20


@pytest.mark.parametrize("method", [None, "sequential", "sequential_unrolled", "fold"])
def test_nested_vmap_and_an_unbatched_argument_with_every_method(device, method):
    op = numba_cuda_kernel(add2d, S((6, 5), jnp.float32), launch_dims=(6, 5), vmap_method=method)
    x = _rand(4, 6, 5)
    y = x[0]
    np.testing.assert_array_equal(jax.vmap(lambda a: op(a, y))(x), x + y)
    xx = np.stack([x, x + 1])
    np.testing.assert_array_equal(jax.jit(jax.vmap(jax.vmap(op)))(xx, xx), 2 * xx)


def test_vmap_of_a_row_coupled_kernel_keeps_rows_apart(device):
    # A batch must never be folded under the unbatched grid: each element's
    # rows are summed on their own.
    op = numba_cuda_kernel(cumsum_rows, S((3, 4), jnp.float32), launch_dims=3)
    x = _rand(5, 3, 4)
    np.testing.assert_allclose(jax.jit(jax.vmap(op))(x), np.cumsum(x, axis=2), rtol=1e-5)


def test_inside_scan(device):
    op = numba_cuda_kernel(axpy, S((8,), jnp.float32), launch_dims=8)
    a = np.array(0.5, F32)

    def step(carry, y):
        nxt = op(a, carry, y)
        return nxt, nxt.sum()

    ys = _rand(6, 8)
    carry, sums = jax.jit(lambda c, ys: lax.scan(step, c, ys))(np.zeros(8, F32), ys)
    expected = np.zeros(8, F32)
    expected_sums = []
    for y in ys:
        expected = 0.5 * expected + y
        expected_sums.append(expected.sum())
    np.testing.assert_allclose(carry, expected, rtol=1e-5, atol=device.atol)
    np.testing.assert_allclose(sums, expected_sums, rtol=1e-5, atol=device.atol)
    if device.emulated:
        assert len(device.launches) == 6


def test_each_device_launches_the_function_loaded_for_it(emulated, monkeypatch):
    # Four devices: the kernel is loaded for each, and the handler picks the
    # function of the device ordinal in the call frame.
    devices = jax.devices("cpu")[:4]
    assert len(devices) == 4, "the workspace conftest gives four CPU devices"
    emulated.devices = tuple(EmulatedDevice(d.id, d.id) for d in devices)
    op = numba_cuda_kernel(add, S((4,), jnp.float32), launch_dims=4)
    mesh = jax.sharding.Mesh(np.array(devices), ("d",))
    spec = jax.sharding.PartitionSpec("d")
    f = jax.jit(jax.shard_map(op, mesh=mesh, in_specs=(spec, spec), out_specs=spec))
    x, y = _rand(16), _rand(16, seed=1)
    np.testing.assert_allclose(f(x, y), x + y, rtol=1e-6)
    assert sorted(emulated.launched_on) == [0, 1, 2, 3]


@cuda.jit
def add_counting(x, y, out, seen):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]
        seen[i] = x.size


def test_a_sharding_rule_launches_on_each_shard(emulated):
    # Under a sharded jit: each of the four devices launches the kernel on its
    # quarter (the launch given covers the whole array, the kernel checks bounds).
    devices = jax.devices("cpu")[:4]
    emulated.devices = tuple(EmulatedDevice(d.id, d.id) for d in devices)
    n = 64
    outs = (S((n,), jnp.float32), S((n,), jnp.int32))
    mesh = jax.sharding.Mesh(np.array(devices), ("d",))
    sharded = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("d"))
    x, y = (jax.device_put(a, sharded) for a in (_rand(n), _rand(n, seed=1)))
    for rule, seen_each, gathered in ((None, n, True), ("elementwise", n // 4, False)):
        op = numba_cuda_kernel(add_counting, outs, launch_dims=n, sharding_rule=rule)
        f = jax.jit(op)
        emulated.launched_on.clear()
        out, seen = f(x, y)
        np.testing.assert_allclose(out, np.asarray(x) + np.asarray(y), rtol=1e-6)
        np.testing.assert_array_equal(seen, np.full(n, seen_each))
        assert sorted(emulated.launched_on) == [0, 1, 2, 3]
        assert ("all-gather" in f.lower(x, y).compile().as_text()) == gathered
        if rule is not None:
            assert out.sharding.is_equivalent_to(sharded, 1)


# ---------------------------------------------------------------- callables


class _FakeNumbaCuda:
    """The few numba.cuda calls a callable's handler makes, over host memory:
    device arrays are NumPy views of XLA's buffers."""

    def __init__(self) -> None:
        self.devices: list[int] = []
        self.streams: list[int] = []

    @property
    def gpus(self) -> Any:
        fake = self

        class _Device:
            def __init__(self, ordinal: int) -> None:
                self.ordinal = ordinal

            def __enter__(self) -> None:
                fake.devices.append(self.ordinal)

            def __exit__(self, *exc: object) -> None:
                return None

        class _Gpus:
            def __getitem__(self, ordinal: int) -> _Device:
                return _Device(ordinal)

        return _Gpus()

    def external_stream(self, ptr: int) -> Any:
        self.streams.append(ptr)
        return ("stream", ptr)

    @staticmethod
    def device_array(shape: Any, dtype: Any) -> np.ndarray:
        return np.empty(shape, dtype)

    @staticmethod
    def from_cuda_array_interface(interface: dict, owner: Any = None, sync: bool = True):
        assert (owner, sync, interface["strides"]) == (None, False, None)
        dtype = np.dtype(interface["typestr"])
        shape = interface["shape"]
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        memory = (ctypes.c_char * nbytes).from_address(interface["data"][0])
        return np.ndarray(shape, dtype, buffer=memory)


class _FakeAllocator:
    """cuMemAllocAsync / cuMemFreeAsync over host buffers, recording streams."""

    def __init__(self) -> None:
        self.buffers: dict[int, Any] = {}
        self.calls: list[tuple[str, int, int]] = []

    def mem_alloc_async(self, nbytes: int, stream: int) -> int:
        buf = ctypes.create_string_buffer(nbytes)
        ptr = ctypes.addressof(buf)
        self.buffers[ptr] = buf
        self.calls.append(("alloc", nbytes, stream))
        return ptr

    def mem_free_async(self, ptr: int, stream: int) -> None:
        assert ptr in self.buffers
        self.calls.append(("free", ptr, stream))


@pytest.fixture
def host_callables(emulated, monkeypatch):
    from numba_cuda_ffi import _callable

    fake_cuda, allocator = _FakeNumbaCuda(), _FakeAllocator()

    def register_on_cpu(name, handler, *, traits=ffi_core.abi.HandlerTraits.NONE, **kwargs):
        # Never command-buffer compatible: on an H100, a custom call that takes a
        # temporary with cuMemAllocAsync while XLA captures its stream makes XLA
        # fail ("Failed to create a child graph node ...: CUDA_ERROR_NOT_SUPPORTED";
        # tools/gpu_check_numba_cuda.py shows it).
        assert traits == ffi_core.abi.HandlerTraits.NONE
        return emulated_register(name, handler, **kwargs)

    monkeypatch.setattr(_callable, "numba_cuda", lambda: fake_cuda)
    monkeypatch.setattr(_callable, "driver", lambda: allocator)
    monkeypatch.setattr(_callable, "register_target", register_on_cpu)
    return fake_cuda, allocator


def test_callable_with_temporaries(host_callables):
    from numba_cuda_ffi import numba_cuda_callable, temporary

    fake_cuda, allocator = host_callables

    def twice_plus(x, y, out, stream):
        assert stream == ("stream", FAKE_STREAM)
        tmp = temporary(x.shape, x.dtype)
        tmp[:] = 2 * x
        empty = temporary((0, 3), np.float32)
        assert empty.shape == (0, 3)
        out[:] = tmp + y

    f = numba_cuda_callable(twice_plus, S((5,), jnp.float32))
    x, y = _rand(5), _rand(5, seed=1)
    np.testing.assert_allclose(jax.jit(f)(x, y), 2 * x + y, rtol=1e-6)
    # Allocated on XLA's stream, freed on it when the function returned.
    (alloc, free) = allocator.calls
    assert alloc == ("alloc", 20, FAKE_STREAM)
    assert free[0] == "free" and free[2] == FAKE_STREAM
    assert fake_cuda.devices == [0] and fake_cuda.streams == [FAKE_STREAM]
    # vmap: one call per batch element (sequential).
    xs = _rand(3, 5)
    np.testing.assert_allclose(jax.jit(jax.vmap(f, in_axes=(0, None)))(xs, y), 2 * xs + y)


def test_callable_errors_name_the_function_and_free_temporaries(host_callables):
    from numba_cuda_ffi import numba_cuda_callable, temporary

    _, allocator = host_callables

    def fails(x, out, stream):
        temporary(4, np.float32)
        raise ValueError("no good")

    f = numba_cuda_callable(fails, S((4,), jnp.float32))
    with pytest.raises(
        jax.errors.JaxRuntimeError,
        match=re.escape("numba cuda callable 'fails' failed: ValueError: no good"),
    ):
        jax.block_until_ready(jax.jit(f)(np.ones(4, F32)))
    assert [c[0] for c in allocator.calls] == ["alloc", "free"]


def test_callable_objects(host_callables):
    # Any callable: objects with __call__ too, each its own target.
    from numba_cuda_ffi import numba_cuda_callable

    class Scale:
        def __init__(self, factor):
            self.factor = factor

        def __call__(self, x, out, stream):
            out[:] = self.factor * x

    x = _rand(4)
    for factor in (2.0, -1.0):
        f = numba_cuda_callable(Scale(factor), S((4,), jnp.float32))
        np.testing.assert_allclose(jax.jit(f)(x), factor * x, rtol=1e-6)


def _scaler(factor):
    @cuda.jit
    def scale(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = factor * x[i]

    return scale


def test_kernels_from_one_factory_run_their_own_code(device):
    # Same bytecode, other captured value: each gets its own target.
    x = _rand(6)
    for factor in (2.0, -3.0):
        op = numba_cuda_kernel(_scaler(F32(factor)), S((6,), jnp.float32), launch_dims=6)
        np.testing.assert_allclose(jax.jit(op)(x), factor * x, rtol=1e-6)


# numba-cuda warns of low occupancy when the callable launches 4 blocks; the
# suite turns warnings into errors, which the callable would then raise.
@pytest.mark.filterwarnings("ignore::numba.cuda.core.errors.NumbaPerformanceWarning")
def test_callable_launching_kernels_with_temporaries_and_errors(real_gpu):
    # The callable's own launches go through numba-cuda: on a real GPU only.
    from numba_cuda_ffi import numba_cuda_callable, temporary

    n = 1000

    def two_steps(a, x, out, stream):
        tmp = temporary(x.shape, x.dtype)
        blocks = (x.size + 255) // 256
        axpy[blocks, 256, stream](a, x, x, tmp)  # tmp = a*x + x
        axpy[blocks, 256, stream](a, tmp, x, out)  # out = a*tmp + x

    f = numba_cuda_callable(two_steps, S((n,), jnp.float32))
    a, x = jnp.float32(2), jnp.arange(n, dtype=jnp.float32)
    expected = 2 * (2 * x + x) + x
    np.testing.assert_allclose(jax.jit(f)(a, x), expected)
    np.testing.assert_allclose(
        jax.vmap(f, in_axes=(None, 0))(a, jnp.stack([x, x])), jnp.stack([expected] * 2)
    )

    def failing(x, out, stream):
        raise ValueError("bad input")

    g = numba_cuda_callable(failing, S((n,), jnp.float32))
    with pytest.raises(
        Exception, match=re.escape("numba cuda callable 'failing' failed: ValueError: bad input")
    ):
        jax.jit(g)(x).block_until_ready()


def test_cpu_placement_is_refused(real_gpu):
    f = numba_cuda_kernel(axpy, S((4,), jnp.float32), launch_dims=4)
    cpu = jax.devices("cpu")[0]
    x = jax.device_put(_rand(4), cpu)
    with pytest.raises(
        RuntimeError, match=re.escape("numba cuda kernel 'axpy' runs on NVIDIA GPUs only")
    ):
        jax.jit(f)(jax.device_put(np.float32(1), cpu), x, x)


def test_real_handler_cache_holds_no_emulated_handler():
    # After the emulated tests above (same kernels, signatures and launches as
    # the real-GPU runs), the module's own cache holds none of their handlers:
    # a real run reusing one would launch into the simulator with device
    # pointers, which crashed a GPU machine.
    from ffi_core.bridge.cuda import _target as real_target

    assert real_target._handlers is not _EMULATED_HANDLERS
    assert not any(entry in _EMULATED_HANDLERS.values() for entry in real_target._handlers.values())
