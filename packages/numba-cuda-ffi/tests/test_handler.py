"""The native handler, run on a fake call frame with fake driver entry points:
metadata, parameter packing (against the PTX parameter count), batches,
zero-size outputs, the context and every error it returns."""

import ctypes
import os
import subprocess
import sys
import textwrap

import ffi_core
import numpy as np
import pytest
from numba import cuda
from numba_cuda_ffi._compile import compile_kernel, param_layout
from numba_cuda_ffi._handler import MAX_DEVICES, build_numba_launch_handler
from numba_cuda_ffi._launch import launch_config
from numba_cuda_ffi._spec import ArraySig, CallSig, KernelInfo

LABEL = "numba cuda kernel 'k'"
F32 = np.float32
FakeDriver = None  # set from the conftest fixture


@cuda.jit
def k(x, s, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = x[i, j] * s[()]


@pytest.fixture(autouse=True)
def _driver_class(fake_driver):
    global FakeDriver
    FakeDriver = fake_driver


def _handler(sig, launch=None, **driver):
    n_params = len(param_layout(sig.kernel_arrays))
    fake = FakeDriver(n_params, **driver)
    h = build_numba_launch_handler(
        sig, launch or launch_config(grid=(2, 3), block=(32, 8), shared_mem=64), LABEL, fake.native
    )
    h.set_device(0, 99, 4242)
    return h, fake


def _expected(arrays, offsets=None):
    """Numba's array struct of each array, flattened (meminfo and parent 0)."""
    values = []
    for n, a in enumerate(arrays):
        data = a.ctypes.data + (offsets[n] if offsets else 0)
        values += [0, 0, a.size, a.itemsize, data, *a.shape, *a.strides]
    return values


SIG = CallSig((ArraySig("float32", 2), ArraySig("float64", 0)), (ArraySig("float32", 2),))


def test_metadata_declares_command_buffer_compatible(fake_xla):
    h, _ = _handler(SIG)
    assert fake_xla.metadata(h.cfunc) == int(ffi_core.abi.HandlerTraits.COMMAND_BUFFER_COMPATIBLE)


def test_packs_numba_array_abi(fake_xla):
    h, fake = _handler(SIG, current_ctx=99)
    x = np.arange(12, dtype=F32).reshape(3, 4)
    s, out = np.array(2.0), np.zeros((3, 4), F32)
    assert fake_xla.call(h.cfunc, [x, s], [out]) == 0
    assert fake_xla.errors == []
    (launch,) = fake.launches
    assert launch.function == 4242
    assert (launch.grid, launch.block, launch.shared_mem) == ((2, 3, 1), (32, 8, 1), 64)
    assert launch.stream == fake_xla.stream
    assert launch.params == _expected([x, s, out])
    # The context was current already: nothing pushed.
    assert (fake.pushed, fake.popped) == ([], 0)
    # As many params as the compiled kernel's PTX declares.
    compiled = compile_kernel(KernelInfo(k), SIG.kernel_arrays, (9, 0))
    assert len(launch.params) == len(compiled.layout)


def test_pushes_the_device_context_when_another_is_current(fake_xla):
    h, fake = _handler(SIG, current_ctx=7)
    x, s, out = np.ones((2, 2), F32), np.array(1.0), np.zeros((2, 2), F32)
    assert fake_xla.call(h.cfunc, [x, s], [out]) == 0
    assert (fake.pushed, fake.popped, len(fake.launches)) == ([99], 1, 1)


def test_device_ordinal_selects_function(fake_xla):
    h, fake = _handler(SIG, current_ctx=55)
    h.set_device(3, 55, 3333)
    fake_xla.ordinal = 3
    x, s, out = np.ones((2, 2), F32), np.array(1.0), np.zeros((2, 2), F32)
    assert fake_xla.call(h.cfunc, [x, s], [out]) == 0
    assert fake.launches[0].function == 3333


def test_batched_launches_once_per_element(fake_xla):
    sig = CallSig(
        (ArraySig("float32", 3), ArraySig("float64", 0)), (ArraySig("float32", 3),), (True, False)
    )
    h, fake = _handler(sig, current_ctx=99)
    x = np.arange(24, dtype=F32).reshape(4, 2, 3)
    s, out = np.array(3.0), np.zeros((4, 2, 3), F32)
    assert fake_xla.call(h.cfunc, [x, s], [out]) == 0
    assert len(fake.launches) == 4
    for b, launch in enumerate(fake.launches):
        assert launch.params == _expected([x[b], s, out[b]])


@pytest.mark.parametrize(
    ("x_shape", "out_shape", "launches"),
    [((0, 4), (0, 4), 0), ((3, 4), (3, 0), 0), ((0, 4), (2, 2), 1)],
)
def test_zero_size_outputs_skip_the_launch(fake_xla, x_shape, out_shape, launches):
    h, fake = _handler(SIG, current_ctx=99)
    x, s, out = np.zeros(x_shape, F32), np.array(1.0), np.zeros(out_shape, F32)
    assert fake_xla.call(h.cfunc, [x, s], [out]) == 0
    assert len(fake.launches) == launches


def test_empty_batch_skips_the_launch(fake_xla):
    sig = CallSig(
        (ArraySig("float32", 3), ArraySig("float64", 0)), (ArraySig("float32", 3),), (True, False)
    )
    h, fake = _handler(sig, current_ctx=99)
    x, s, out = np.zeros((0, 2, 3), F32), np.array(1.0), np.zeros((0, 2, 3), F32)
    assert fake_xla.call(h.cfunc, [x, s], [out]) == 0
    assert fake.launches == []


def _error(fake_xla, result):
    assert result == len(fake_xla.errors) != 0
    return fake_xla.errors[-1]


def test_launch_failure_becomes_error_naming_kernel(fake_xla):
    h, fake = _handler(SIG, current_ctx=7, launch_result=700)
    x, s, out = np.ones((2, 2), F32), np.array(1.0), np.zeros((2, 2), F32)
    message, code = _error(fake_xla, fake_xla.call(h.cfunc, [x, s], [out]))
    assert message == f"{LABEL}: cuLaunchKernel failed with CUDA_ERROR_ILLEGAL_ADDRESS (700)"
    assert code == ffi_core.abi.ErrorCode.INTERNAL
    assert (fake.pushed, fake.popped) == ([99], 1)  # the context is restored


@pytest.mark.parametrize("ordinal", [1, MAX_DEVICES, -1])
def test_unloaded_device_is_an_error(fake_xla, ordinal):
    h, fake = _handler(SIG)
    fake_xla.ordinal = ordinal
    x, s, out = np.ones((2, 2), F32), np.array(1.0), np.zeros((2, 2), F32)
    message, _ = _error(fake_xla, fake_xla.call(h.cfunc, [x, s], [out]))
    assert message == (
        f"{LABEL}: no module is loaded for device ordinal {ordinal}; the kernel is loaded into "
        "every local GPU of JAX when the computation is lowered, so this device was not one of "
        f"them (at most {MAX_DEVICES} devices are supported)"
    )
    assert fake.launches == []


@pytest.mark.parametrize(
    ("ins", "outs", "message"),
    [
        (
            [np.ones((2, 2), F32)],
            [np.zeros((2, 2), F32)],
            f"{LABEL}: called with a wrong number of buffers; expected 2 inputs and 1 outputs",
        ),
        (
            [np.ones((2, 2), np.float64), np.array(1.0)],
            [np.zeros((2, 2), F32)],
            f"{LABEL}: buffer 0 is not float32 of rank 2",
        ),
        (
            [np.ones((2, 2), F32), np.ones(1)],
            [np.zeros((2, 2), F32)],
            f"{LABEL}: buffer 1 is not float64 of rank 0",
        ),
    ],
)
def test_buffer_checks(fake_xla, ins, outs, message):
    h, fake = _handler(SIG)
    assert _error(fake_xla, fake_xla.call(h.cfunc, ins, outs)) == (message, 3)
    assert fake.launches == []


def test_set_device_out_of_range():
    h, _ = _handler(SIG)
    with pytest.raises(
        RuntimeError,
        match=f"^device ordinal {MAX_DEVICES} is beyond the {MAX_DEVICES} devices a kernel handler supports$",
    ):
        h.set_device(MAX_DEVICES, 1, 1)


def test_kernels_of_one_call_shape_share_one_compiled_handler(fake_xla):
    # Two kernels of the same call shape on one driver: one handler compiled,
    # each called through its own entry point with its own record: its
    # function, grid, block, shared memory and the label its errors start with.
    n_params = len(param_layout(SIG.kernel_arrays))
    fake = FakeDriver(n_params, current_ctx=99)
    first = build_numba_launch_handler(
        SIG, launch_config(grid=(2, 3), block=(32, 8), shared_mem=64), LABEL, fake.native
    )
    second = build_numba_launch_handler(
        SIG, launch_config(grid=(5,), block=(128,)), "numba cuda kernel 'other'", fake.native
    )
    assert first.shared is second.shared and first.cfunc.address != second.cfunc.address
    first.set_device(0, 99, 4242)
    second.set_device(0, 99, 5353)
    x, s, out = np.ones((2, 2), F32), np.array(1.0), np.zeros((2, 2), F32)
    assert fake_xla.call(second.cfunc, [x, s], [out]) == 0
    assert fake_xla.call(first.cfunc, [x, s], [out]) == 0
    assert [(a.function, a.grid, a.block, a.shared_mem) for a in fake.launches] == [
        (5353, (5, 1, 1), (128, 1, 1), 0),
        (4242, (2, 3, 1), (32, 8, 1), 64),
    ]
    message, _ = _error(fake_xla, fake_xla.call(second.cfunc, [x], [out]))
    assert message == (
        "numba cuda kernel 'other': called with a wrong number of buffers; "
        "expected 2 inputs and 1 outputs"
    )
    fake_xla.ordinal = 1
    message, _ = _error(fake_xla, fake_xla.call(first.cfunc, [x, s], [out]))
    assert message.startswith(f"{LABEL}: no module is loaded for device ordinal 1;")
    # Another call shape (a batch) has a handler of its own.
    batched = CallSig(SIG.inputs, SIG.outputs, (True, False))
    launch = launch_config(grid=(1,), block=(1,))
    third = build_numba_launch_handler(batched, launch, LABEL, fake.native)
    assert third.shared is not first.shared


def test_one_handler_serves_kernels_of_several_drivers(fake_xla):
    # The driver's entry points come from each kernel's record: one compiled
    # handler launches through whichever driver its kernel was built against.
    n_params = len(param_layout(SIG.kernel_arrays))
    drivers = [FakeDriver(n_params, current_ctx=99) for _ in range(2)]
    handlers = [
        build_numba_launch_handler(SIG, launch_config(grid=(n + 1,), block=(32,)), LABEL, d.native)
        for n, d in enumerate(drivers)
    ]
    assert handlers[0].shared is handlers[1].shared
    x, s, out = np.ones((2, 2), F32), np.array(1.0), np.zeros((2, 2), F32)
    for n, h in enumerate(handlers):
        h.set_device(0, 99, 100 + n)
        assert fake_xla.call(h.cfunc, [x, s], [out]) == 0
    assert [[(a.function, a.grid) for a in d.launches] for d in drivers] == [
        [(100, (1, 1, 1))],
        [(101, (2, 1, 1))],
    ]


_CACHED = textwrap.dedent(
    """
    import numpy as np
    {patch}
    from ffi_core.bridge.cuda.testing import FakeDriver, FakeXLA
    from numba_cuda_ffi._compile import param_layout
    from numba_cuda_ffi._handler import build_numba_launch_handler
    from numba_cuda_ffi._launch import launch_config
    from numba_cuda_ffi._spec import ArraySig, CallSig

    sig = CallSig((ArraySig("float32", 2), ArraySig("float64", 0)), (ArraySig("float32", 2),))
    fake = FakeDriver(len(param_layout(sig.kernel_arrays)), current_ctx=99, launch_result={rc})
    h = build_numba_launch_handler(sig, launch_config(grid=(3,), block=(64,)), "kernel 'k'",
                                   fake.native)
    h.set_device(0, 99, 4242)
    xla = FakeXLA()
    x, s, out = np.ones((2, 2), np.float32), np.array(1.0), np.zeros((2, 2), np.float32)
    result = xla.call(h.cfunc, [x, s], [out])
    print(h.shared._cache_hits, result, xla.errors,
          [(a.function, a.grid, a.block) for a in fake.launches], hex(fake.launches[-1].stream))
    """
)


def _cached_run(cache, rc=0, patch="", **extra):
    env = {**os.environ, "FFI_CORE_CUDA_HANDLER_CACHE_DIR": str(cache), **extra}
    proc = subprocess.run(
        [sys.executable, "-c", _CACHED.format(rc=rc, patch=patch)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1], proc.stderr


def test_a_later_process_loads_the_handler_from_the_disk_cache(tmp_path):
    cache = tmp_path / "handlers"
    launched = "[(4242, (3, 1, 1), (64, 1, 1))] 0x5000"
    first, _ = _cached_run(cache)
    assert first == f"0 0 [] {launched}"
    assert len(list(cache.glob("*.nbc"))) == 1
    assert cache.stat().st_mode & 0o777 == 0o700
    second, _ = _cached_run(cache)
    assert second == f"1 0 [] {launched}"
    # The cached handler reports a failing launch with this process's reporter.
    failed, _ = _cached_run(cache, rc=700)
    assert failed.startswith("1 1 [(\"kernel 'k': cuLaunchKernel failed with ")
    assert "CUDA_ERROR_ILLEGAL_ADDRESS (700)" in failed


def test_a_corrupt_cached_handler_is_a_miss_compiled_again(tmp_path):
    cache = tmp_path / "handlers"
    _cached_run(cache)
    (data,) = cache.glob("*.nbc")
    content = bytearray(data.read_bytes())
    content[-10] ^= 0xFF
    data.write_bytes(bytes(content))
    out, err = _cached_run(cache)
    assert out.startswith("0 0 [] ")
    assert f"the CUDA launcher's handler cache file {str(data)!r} does not match" in err
    again, _ = _cached_run(cache)
    assert again.startswith("1 0 [] ")


_STAND_IN = """
import numba
from numba import types
from ffi_core.abi import native as nv

@numba.njit(inline="always")
def stand_in(frame):
    return 0, types.uintp(0x7000)

nv.stream_get = stand_in
"""


def test_a_handler_calling_another_global_is_another_entry(tmp_path):
    # A test harness standing in its own stream_get (as tools/bench_launch_host.py
    # does) gets a handler of its own, and the next process the real one.
    cache = tmp_path / "handlers"
    assert _cached_run(cache)[0].endswith(" 0x5000")
    stood_in, _ = _cached_run(cache, patch=_STAND_IN)
    assert stood_in.startswith("0 0 [] ") and stood_in.endswith(" 0x7000")
    again, _ = _cached_run(cache)
    assert again.startswith("1 0 [] ") and again.endswith(" 0x5000")
    assert _cached_run(cache, patch=_STAND_IN)[0].startswith("1 0 [] ")


def test_an_empty_variable_means_no_handler_cache(tmp_path):
    # Not even the default directory (under $XDG_CACHE_HOME) is written.
    out, _ = _cached_run("", XDG_CACHE_HOME=str(tmp_path))
    assert out.startswith("0 0 [] ")
    assert not list(tmp_path.iterdir())
    out, _ = _cached_run("", XDG_CACHE_HOME=str(tmp_path))
    assert out.startswith("0 0 [] ")


def test_the_handler_source_holds_no_address_of_the_process():
    # What can be cached: the driver's entry points come from the record, and
    # the launch reads its seven words (grid, block, shared memory) only.
    h, fake = _handler(SIG)
    names = ("launch", "ctx_get_current", "ctx_push", "ctx_pop")
    addresses = [ctypes.cast(getattr(fake.native, n), ctypes.c_void_p).value for n in names]
    assert all(str(a) not in h.source for a in addresses)
    launch_words = [line.split("=")[0].strip() for line in h.source.splitlines()]
    assert [w for w in launch_words if w.startswith("g_")] == [f"g_{i}" for i in range(7)]
