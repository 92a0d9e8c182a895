"""Content-addressed target names and the process-wide target registry.

The registry lives for the whole process, so every test registers names of
its own (the test's name is part of the prefix).
"""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import threading
import weakref
from typing import Any

import ffi_core
import ffi_core.bridge
import pytest
from ffi_core import TargetConflictError
from ffi_core.abi import HandlerTraits
from ffi_core.abi._python_handler import HANDLER_CFUNCTYPE

# target_name("ffi_core_tests.known", "float32[1]", 2, (3.5, None)), computed
# once: a change here breaks jax.export artifacts and persistent caches.
KNOWN_CONTENT: tuple[Any, ...] = ("float32[1]", 2, (3.5, None))
KNOWN_NAME = "ffi_core_tests.known_a0cd19df45fcc4f822b3"


class _CountingRegister:
    """Stands in for jax.ffi.register_ffi_target and records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def __call__(self, name: str, capsule: object, *, platform: str, **kwargs: Any) -> None:
        with self._lock:
            self.calls.append((name, platform, kwargs))


def _noop(frame: ffi_core.abi.CallFrame) -> None:
    pass


def _handler(name: str) -> object:
    return ffi_core.abi.python_handler(_noop, name=name)


def test_target_name_is_stable() -> None:
    first = ffi_core.bridge.target_name("ffi_core_tests.stable", "float32[1]", 3)
    assert first == ffi_core.bridge.target_name("ffi_core_tests.stable", "float32[1]", 3)
    assert re.fullmatch(r"ffi_core_tests\.stable_[0-9a-f]{20}", first)


def test_target_name_known_value() -> None:
    assert ffi_core.bridge.target_name("ffi_core_tests.known", *KNOWN_CONTENT) == KNOWN_NAME


@pytest.mark.parametrize("hash_seed", ["0", "12345"])
def test_target_name_is_the_same_in_another_process(hash_seed: str) -> None:
    code = f"import ffi_core.bridge; print(ffi_core.bridge.target_name('ffi_core_tests.known', *{KNOWN_CONTENT!r}))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": hash_seed},
    )
    assert result.stdout.strip() == KNOWN_NAME


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("float32[1]",), ("float64[1]",)),
        (("float32[1]",), ("float32[1]", "float32[1]")),
        (("1",), (1,)),
        ((), ("",)),
    ],
)
def test_target_name_differs_with_content(a: tuple[object, ...], b: tuple[object, ...]) -> None:
    assert ffi_core.bridge.target_name("ffi_core_tests.differs", *a) != ffi_core.bridge.target_name(
        "ffi_core_tests.differs", *b
    )


def test_target_name_refuses_empty_prefix() -> None:
    with pytest.raises(ValueError, match=re.escape("`prefix` must be a non-empty str, got ''")):
        ffi_core.bridge.target_name("", "content")


@pytest.mark.parametrize("prefix", [None, 3, b"bytes"])
def test_target_name_refuses_non_str_prefix(prefix: object) -> None:
    message = f"`prefix` must be a non-empty str, got {type(prefix)!r}"
    with pytest.raises(TypeError, match=re.escape(message)):
        ffi_core.bridge.target_name(prefix, "content")  # type: ignore[arg-type]


def test_register_target_is_idempotent() -> None:
    name = ffi_core.bridge.target_name("ffi_core_tests.idempotent", "v1")
    handler = _handler(name)
    assert ffi_core.bridge.register_target(name, handler, content="v1") is True
    assert ffi_core.bridge.register_target(name, handler, content="v1") is False
    # Same content, another handler object: still the first registration.
    assert ffi_core.bridge.register_target(name, _handler(name), content="v1") is False
    assert ffi_core.bridge.registered_targets()[(name, "cpu")] == "v1"


def test_register_target_conflict() -> None:
    name = ffi_core.bridge.target_name("ffi_core_tests.conflict", "v1")
    register = _CountingRegister()
    assert ffi_core.bridge.register_target(name, _handler(name), content="v1", register=register)
    message = (
        f"FFI target {name!r} on 'cpu' is already registered with different content; target "
        "names must be derived from content (use ffi_core.bridge.target_name) so that one name never "
        "means two handlers"
    )
    with pytest.raises(TargetConflictError, match=re.escape(message)):
        ffi_core.bridge.register_target(name, _handler(name), content="v2", register=register)
    assert len(register.calls) == 1
    assert ffi_core.bridge.registered_targets()[(name, "cpu")] == "v1"
    assert issubclass(TargetConflictError, ValueError)


def test_same_name_on_two_platforms_is_two_targets() -> None:
    name = ffi_core.bridge.target_name("ffi_core_tests.platforms", "v1")
    register = _CountingRegister()
    assert ffi_core.bridge.register_target(name, _handler(name), content="v1", register=register)
    assert ffi_core.bridge.register_target(
        name, _handler(name), content="v2", platform="cuda", register=register
    )
    assert [(n, p) for n, p, _ in register.calls] == [(name, "cpu"), (name, "CUDA")]


@pytest.mark.parametrize(("platform", "xla_name"), [("cuda", "CUDA"), ("rocm", "ROCM")])
def test_gpu_targets_reach_the_name_the_gpu_plugin_registers(platform: str, xla_name: str) -> None:
    # XLA's Python client forwards a registration to the plugin registered for
    # the platform's XLA name ("CUDA", "ROCM") and keeps it pending until that
    # plugin loads. Registered under "cuda", a target was never forwarded and
    # every call failed with "No FFI handler registered ... on a platform CUDA".
    from jaxlib import xla_client

    name = ffi_core.bridge.target_name("ffi_core_tests.gpu_pending", platform)
    assert ffi_core.bridge.register_target(name, _handler(name), content="v1", platform=platform)
    if xla_name in xla_client._custom_callback_handler:
        pytest.skip(f"a {xla_name} plugin is loaded: the registration went to it")
    pending = xla_client._custom_callback.get(xla_name, [])
    assert name in [entry[0] for entry in pending]
    assert not any(name == entry[0] for entry in xla_client._custom_callback.get(platform, []))


@pytest.mark.parametrize("platform", ["tpu", "CPU", "gpu", ""])
def test_register_target_refuses_bad_platform(platform: str) -> None:
    message = f"`platform` must be one of ('cpu', 'cuda', 'rocm'), got {platform!r}"
    with pytest.raises(ValueError, match=re.escape(message)):
        ffi_core.bridge.register_target(
            "ffi_core_tests.bad_platform", _handler("x"), content="v1", platform=platform
        )
    assert ffi_core.bridge.TARGET_PLATFORMS == ("cpu", "cuda", "rocm")


@pytest.mark.parametrize(
    ("traits", "expected"),
    [(HandlerTraits.NONE, set()), (HandlerTraits.COMMAND_BUFFER_COMPATIBLE, {"traits"})],
    ids=["none", "command-buffer"],
)
def test_register_target_passes_traits(traits: HandlerTraits, expected: set[str]) -> None:
    name = ffi_core.bridge.target_name("ffi_core_tests.traits", int(traits))
    register = _CountingRegister()
    ffi_core.bridge.register_target(
        name, _handler(name), content="v1", platform="cuda", traits=traits, register=register
    )
    ((_, _, kwargs),) = register.calls
    assert set(kwargs) == {"api_version"} | expected
    assert kwargs["api_version"] == 1


def test_register_target_failure_registers_nothing() -> None:
    name = ffi_core.bridge.target_name("ffi_core_tests.failure", "v1")

    def failing(*args: object, **kwargs: object) -> None:
        raise RuntimeError("XLA said no")

    with pytest.raises(RuntimeError, match=re.escape("XLA said no")):
        ffi_core.bridge.register_target(name, _handler(name), content="v1", register=failing)
    assert (name, "cpu") not in ffi_core.bridge.registered_targets()
    assert ffi_core.bridge.register_target(
        name, _handler(name), content="v1", register=_CountingRegister()
    )


def test_register_target_pins_handler_and_extras() -> None:
    class Extra:
        pass

    name = ffi_core.bridge.target_name("ffi_core_tests.pins", "v1")
    handler, extra = _handler(name), Extra()
    refs = [weakref.ref(handler), weakref.ref(extra)]
    ffi_core.bridge.register_target(
        name, handler, content="v1", pin=(extra,), register=_CountingRegister()
    )
    del handler, extra
    gc.collect()
    assert all(ref() is not None for ref in refs)


def test_register_target_thread_safety() -> None:
    name = ffi_core.bridge.target_name("ffi_core_tests.threads", "v1")
    register = _CountingRegister()
    barrier = threading.Barrier(8)
    results: list[bool] = []
    errors: list[BaseException] = []

    def work() -> None:
        handler = _handler(name)
        barrier.wait()
        try:
            results.append(
                ffi_core.bridge.register_target(name, handler, content="v1", register=register)
            )
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(results) == [False] * 7 + [True]
    assert len(register.calls) == 1
    assert ffi_core.bridge.registered_targets()[(name, "cpu")] == "v1"


def test_registered_targets_is_a_snapshot() -> None:
    name = ffi_core.bridge.target_name("ffi_core_tests.snapshot", "v1")
    ffi_core.bridge.register_target(
        name, _handler(name), content="v1", register=_CountingRegister()
    )
    snapshot = ffi_core.bridge.registered_targets()
    snapshot.clear()
    assert (name, "cpu") in ffi_core.bridge.registered_targets()


class _WithAddress:
    def __init__(self, address: object) -> None:
        self.address = address


@pytest.mark.parametrize(
    ("handler", "expected"),
    [(4096, 4096), (_WithAddress(8192), 8192)],
    ids=["int", "address-attribute"],
)
def test_handler_address(handler: object, expected: int) -> None:
    assert ffi_core.bridge.handler_address(handler) == expected


def test_handler_address_of_ctypes_function() -> None:
    handler = _handler("ffi_core_tests.address")
    import ctypes

    assert ffi_core.bridge.handler_address(handler) == ctypes.cast(handler, ctypes.c_void_p).value


@pytest.mark.parametrize(
    "handler",
    ["0x1000", 1.5, None, True, _WithAddress("0x1000")],
    ids=["str", "float", "None", "bool", "str-address-attribute"],
)
def test_handler_address_refuses_wrong_type(handler: object) -> None:
    message = (
        "`handler` must be an int address, a ctypes function pointer or an object with an int "
        f"`address` (a numba cfunc), got {type(handler)!r}"
    )
    with pytest.raises(TypeError, match=re.escape(message)):
        ffi_core.bridge.handler_address(handler)


@pytest.mark.parametrize(
    ("handler", "address"),
    [(0, 0), (-16, -16), (_WithAddress(0), 0), (HANDLER_CFUNCTYPE(), 0)],
    ids=["zero", "negative", "address-attribute", "null-ctypes"],
)
def test_handler_address_refuses_null(handler: object, address: int) -> None:
    message = f"`handler` must point somewhere, got address {address}"
    with pytest.raises(ValueError, match=re.escape(message)):
        ffi_core.bridge.handler_address(handler)


def test_register_target_checks_handler() -> None:
    message = f"`handler` must point somewhere, got address {0}"
    with pytest.raises(ValueError, match=re.escape(message)):
        ffi_core.bridge.register_target("ffi_core_tests.null", 0, content="v1")
    assert ("ffi_core_tests.null", "cpu") not in ffi_core.bridge.registered_targets()
