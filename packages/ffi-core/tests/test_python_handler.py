"""Python handlers end to end: registered, then called through jax.ffi.ffi_call on CPU."""

from __future__ import annotations

import re
from collections.abc import Callable

import ffi_core
import ffi_core.bridge
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from ffi_core.abi import CallFrame, ErrorCode, ExecutionStage, HandlerTraits

# A failing handler surfaces as JaxRuntimeError; jaxlib's C++ fast path for an
# already-compiled jit function raises the same message as a ValueError.
RUNTIME_ERRORS = (jax.errors.JaxRuntimeError, ValueError)


def _register(prefix: str, fn: Callable[[CallFrame], None], *content: object) -> str:
    """Register ``fn`` under a name of its own: the registry is process-wide and
    keeps the first handler of a name, so closures need distinct names."""
    name = ffi_core.bridge.target_name(prefix, *content)
    ffi_core.bridge.register_target(
        name, ffi_core.abi.python_handler(fn, name=name), content=repr(content)
    )
    return name


def _double(frame: CallFrame) -> None:
    (x,), (out,) = frame.args, frame.rets
    out.as_numpy()[...] = x.as_numpy() * 2


def _same_as(x: jax.Array) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (0, 4)], ids=str)
@pytest.mark.parametrize(
    "dtype",
    [np.float32, np.float64, np.int32, np.uint8, np.complex64, ml_dtypes.bfloat16],
    ids=lambda d: np.dtype(d).name,
)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_double(shape: tuple[int, ...], dtype: type, jit: bool, cpu: jax.Device) -> None:
    name = _register("ffi_core_tests.double", _double)
    x = jax.device_put(
        np.arange(np.prod(shape), dtype=np.float32).reshape(shape).astype(dtype), cpu
    )
    f = jax.ffi.ffi_call(name, _same_as(x))
    out = (jax.jit(f) if jit else f)(x)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x) * 2)


def test_frame_describes_buffers(cpu: jax.Device) -> None:
    seen: list[tuple[object, ...]] = []

    def probe(frame: CallFrame) -> None:
        a, b = frame.args
        (out,) = frame.rets
        seen.append((frame.stage, a, b, out, frame.api != 0, frame.ctx != 0))
        out.as_numpy()[...] = a.as_numpy()

    name = _register("ffi_core_tests.probe", probe)
    a = jax.device_put(jnp.ones((2, 3), jnp.float32), cpu)
    b = jax.device_put(jnp.ones((4,), jnp.int64 if jax.config.jax_enable_x64 else jnp.int32), cpu)
    jax.jit(jax.ffi.ffi_call(name, _same_as(a)))(a, b).block_until_ready()
    ((stage, va, vb, vout, has_api, has_ctx),) = seen
    assert stage is ExecutionStage.EXECUTE
    assert (va.shape, va.dtype, va.size, va.dtype_code) == ((2, 3), np.float32, 6, 11)
    assert (vb.shape, vb.dtype, vb.size) == ((4,), b.dtype, 4)
    assert vb.dtype_code == ffi_core.abi.code_from_dtype(b.dtype)
    assert vout.shape == (2, 3) and vout.data != va.data
    assert has_api and has_ctx


def test_zero_size_buffer_as_numpy() -> None:
    view = ffi_core.abi.BufferView(dtype_code=int(ffi_core.abi.DataType.F32), data=0, shape=(0, 3))
    array = view.as_numpy()
    assert array.shape == (0, 3) and array.dtype == np.float32


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_exception_surfaces_and_next_call_works(warm: bool, cpu: jax.Device) -> None:
    def double_small(frame: CallFrame) -> None:
        (x,), (out,) = frame.args, frame.rets
        if x.as_numpy()[0] > 100:
            raise ValueError("boom")
        out.as_numpy()[...] = x.as_numpy() * 2

    name = _register(f"ffi_core_tests.boom_{'warm' if warm else 'cold'}", double_small)
    x = jax.device_put(jnp.arange(3, dtype=jnp.float32), cpu)
    f = jax.jit(jax.ffi.ffi_call(name, _same_as(x)))
    if warm:
        f(x).block_until_ready()
    with pytest.raises(
        RUNTIME_ERRORS, match=re.escape(f"UNKNOWN: {name} failed: ValueError: boom")
    ):
        f(x + 1000).block_until_ready()
    np.testing.assert_array_equal(np.asarray(f(x + 1)), [2.0, 4.0, 6.0])


def test_exception_surfaces_eagerly(cpu: jax.Device) -> None:
    def fail(frame: CallFrame) -> None:
        raise RuntimeError

    name = _register("ffi_core_tests.eager_fail", fail)
    x = jax.device_put(jnp.zeros((2,), jnp.float32), cpu)
    with pytest.raises(RUNTIME_ERRORS, match=re.escape(f"{name} failed: RuntimeError")):
        jax.ffi.ffi_call(name, _same_as(x))(x).block_until_ready()


def test_stream_on_cpu_raises(cpu: jax.Device) -> None:
    checked: list[bool] = []

    def stream(frame: CallFrame) -> None:
        message = "XLA_FFI_Stream_Get failed: XLA FFI GPU context is not available"
        with pytest.raises(ffi_core.abi.FFIError, match=re.escape(message)):
            frame.stream()
        checked.append(True)
        _double(frame)

    name = _register("ffi_core_tests.stream", stream)
    x = jax.device_put(jnp.ones((2,), jnp.float32), cpu)
    jax.jit(jax.ffi.ffi_call(name, _same_as(x)))(x).block_until_ready()
    assert checked == [True]
    assert issubclass(ffi_core.abi.FFIError, RuntimeError)


@pytest.mark.parametrize("device_index", range(len(jax.devices("cpu"))))
def test_device_ordinal_on_cpu(device_index: int) -> None:
    seen: list[int] = []

    def ordinal(frame: CallFrame) -> None:
        seen.append(frame.device_ordinal())
        _double(frame)

    device = jax.devices("cpu")[device_index]
    name = _register("ffi_core_tests.ordinal", ordinal, device_index)
    x = jax.device_put(jnp.ones((2,), jnp.float32), device)
    jax.jit(jax.ffi.ffi_call(name, _same_as(x)))(x).block_until_ready()
    assert seen == [device.id]


def test_command_buffer_traits_on_cpu(cpu: jax.Device) -> None:
    name = ffi_core.bridge.target_name("ffi_core_tests.traits_e2e", "v1")
    traits = HandlerTraits.COMMAND_BUFFER_COMPATIBLE
    handler = ffi_core.abi.python_handler(_double, name=name, traits=traits)
    ffi_core.bridge.register_target(name, handler, content="v1", traits=traits)
    x = jax.device_put(jnp.arange(3, dtype=jnp.float32), cpu)
    np.testing.assert_array_equal(
        np.asarray(jax.jit(jax.ffi.ffi_call(name, _same_as(x)))(x)), [0.0, 2.0, 4.0]
    )


@pytest.mark.parametrize(
    "code", [ErrorCode.UNKNOWN, ErrorCode.INVALID_ARGUMENT, ErrorCode.INTERNAL]
)
@pytest.mark.parametrize("message", ["plain", "ünïcode ✓", ""])
def test_error_round_trip(code: ErrorCode, message: str, ffi_api: int) -> None:
    error = ffi_core.abi.create_error(ffi_api, message, code)
    assert error != 0
    assert ffi_core.abi.error_message(ffi_api, error) == message
    ffi_core.abi.destroy_error(ffi_api, error)


def test_frame_error(cpu: jax.Device) -> None:
    seen: list[str] = []

    def make_error(frame: CallFrame) -> None:
        error = frame.error("made by the frame", ErrorCode.OUT_OF_RANGE)
        seen.append(ffi_core.abi.error_message(frame.api, error))
        ffi_core.abi.destroy_error(frame.api, error)
        _double(frame)

    name = _register("ffi_core_tests.frame_error", make_error)
    x = jax.device_put(jnp.ones((2,), jnp.float32), cpu)
    jax.jit(jax.ffi.ffi_call(name, _same_as(x)))(x).block_until_ready()
    assert seen == ["made by the frame"]
