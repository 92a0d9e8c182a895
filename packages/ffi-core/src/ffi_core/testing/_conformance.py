"""One conformance suite for bridges: what every bridge's operations share,
checked the same way for each.

A bridge's tests describe the bridge once (:class:`BridgeUnderTest`: how to
make an operation from a kernel that doubles a float32 vector, how its
kernel is named in messages, its compile error, dtype table, vmap methods,
cache variable) and collect the suite with
``TestConformance = conformance_tests(BRIDGE)``. The suite then checks the
op's name and docstring, the compile-error base, the vmap methods and the
message for an unknown one, both dtype messages, differentiation refused
naming the kernel and the fix (plain, under ``vmap`` and through a sharding
rule), and that the tests keep the bridge's cache out of the user's.

Only ffi-core, JAX and pytest are needed: each bridge runs it with only its
own package installed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ._messages import DIFFERENTIATION_TRANSFORMS, check_differentiation_refused, raises_exactly

__all__ = ["BridgeUnderTest", "conformance_tests"]

#: Values of ``vmap_method`` that the suite expects a bridge to refuse
#: unless it lists them among its own methods.
_UNKNOWN_VMAP_METHODS = ("loop", "fold")


@dataclass(frozen=True, kw_only=True)
class BridgeUnderTest:
    """One bridge as the conformance suite sees it.

    The kernel behind ``make`` takes one float32 vector of 8 elements and
    writes one of the same shape (``out[i] = 2 * x[i]``).

    Attributes:
        kernel: the kernel in words, as the bridge's messages name it
            (``"triton kernel 'scale'"``).
        make: ``make(outs, **options)`` makes the operation, ``options`` being
            ``vmap_method`` or ``sharding_rule``.
        compile_error: the bridge's compile error.
        name: the operation's ``__name__`` and ``__qualname__``.
        call_kwargs: keyword arguments of every call (scalars, as callables
            of the input shapes where a sharded call needs the shard's).
        platform: ``"gpu"``: the differentiation checks trace on ffi-core's
            emulated GPU.
        compile_error_bases: the exception types the compile error also is,
            besides ffi-core's ``KernelCompileError``.
        vmap_methods: the bridge's public table of vmap methods; None where it
            exports none.
        own_vmap_methods: the methods the bridge adds to ffi-core's.
        dtypes_kernels: the subject of the dtype messages (``"Triton
            kernels"``); None: the dtype messages are not checked.
        supported_dtypes: the dtypes those messages list.
        unsupported_dtype: a dtype the bridge refuses (a name or a dtype:
            ``jax.numpy.int4``).
        inputs_kernel: the kernel as the input checks' messages name it,
            where that is not ``kernel`` (``"kernel 'scale'"``).
        differentiable: the bridge differentiates its kernels itself, so the
            refusal checks do not apply.
        derivative_fix: what the refusal to differentiate says to do, as its
            message ends (the bridge's ``KernelInfo.derivative_fix``, stated
            whole); None: ffi-core's default, JAX's way alone.
        batching: the bridge's operations run under ``jax.vmap``.
        vmap_method: the ``vmap_method`` of the operation checked under
            ``jax.vmap`` (None: the bridge's default).
        sharding: the bridge takes ``sharding_rule``.
        cache_env: the environment variable naming the bridge's disk cache,
            which the tests must point at a temporary folder (see
            :func:`ffi_core.testing.cache_dir_fixture`); None: no disk cache.
    """

    kernel: str
    make: Callable[..., Callable[..., Any]]
    compile_error: type[BaseException]
    name: str = "scale"
    call_kwargs: Mapping[str, Any] = field(default_factory=dict)
    platform: Literal["cpu", "gpu"] = "cpu"
    compile_error_bases: tuple[type[BaseException], ...] = (TypeError,)
    vmap_methods: tuple[str, ...] | None = None
    own_vmap_methods: tuple[str, ...] = ()
    dtypes_kernels: str | None = None
    supported_dtypes: tuple[str, ...] = ()
    unsupported_dtype: Any = "complex64"
    inputs_kernel: str | None = None
    differentiable: bool = False
    derivative_fix: str | None = None
    batching: bool = True
    vmap_method: str | None = "sequential"
    sharding: bool = True
    cache_env: str | None = None


def _vector() -> Any:
    import jax.numpy as jnp

    return jnp.arange(8, dtype=jnp.float32)


def _outs(dtype: Any = "float32") -> Any:
    import jax

    return jax.ShapeDtypeStruct((8,), dtype)


def conformance_tests(bridge: BridgeUnderTest) -> type:
    """The conformance suite for ``bridge``: a class for pytest to collect.

    Assign it to a name starting with ``Test`` in a test module::

        TestConformance = conformance_tests(BRIDGE)

    Each check that applies to the bridge is a test method of the class
    (dtype messages only with ``dtypes_kernels``, the differentiation checks
    only for a bridge that is not ``differentiable``, ...).

    Example:
        >>> from ffi_core.bridge import KernelCompileError
        >>> bridge = BridgeUnderTest(
        ...     kernel="toy kernel 'scale'",
        ...     make=lambda outs, **options: None,  # a bridge's kernel op
        ...     compile_error=KernelCompileError,
        ...     differentiable=True,
        ... )
        >>> [name for name in dir(conformance_tests(bridge)) if name.startswith("test_")]
        ['test_compile_error_is_every_bridge_s', 'test_op_is_named_after_the_kernel', 'test_unknown_vmap_method_is_refused']

    Raises:
        TypeError: ``bridge`` is not a :class:`BridgeUnderTest`.
    """
    import pytest  # a test dependency: imported only when a test module asks for it

    from ..bridge import VMAP_METHODS, KernelCompileError

    if not isinstance(bridge, BridgeUnderTest):
        raise TypeError(f"`bridge` must be a BridgeUnderTest, got {type(bridge).__name__}")

    def call(op: Callable[..., Any]) -> Callable[[Any], Any]:
        return lambda x: op(x, **bridge.call_kwargs)

    accepted_vmap_methods = (*VMAP_METHODS, *bridge.own_vmap_methods)
    namespace: dict[str, Any] = {"bridge": bridge}

    @pytest.fixture
    def platform(self: Any) -> Any:
        # Tracing only: nothing is lowered, so no handler is built against this driver.
        if bridge.platform == "cpu":
            yield "cpu"
            return
        from ..bridge.cuda.testing import EmulatedGPU, emulate

        with emulate(EmulatedGPU()) as gpu:
            yield gpu

    namespace["platform"] = platform

    def test_op_is_named_after_the_kernel(self: Any) -> None:
        op = bridge.make(_outs())
        assert (op.__name__, op.__qualname__, op.__doc__) == (
            bridge.name,
            bridge.name,
            f"{bridge.kernel} as a JAX operation.",
        )

    def test_compile_error_is_every_bridge_s(self: Any) -> None:
        assert issubclass(bridge.compile_error, KernelCompileError)
        for base in bridge.compile_error_bases:
            assert issubclass(bridge.compile_error, base), base

    @pytest.mark.parametrize(
        "method", [m for m in _UNKNOWN_VMAP_METHODS if m not in accepted_vmap_methods]
    )
    def test_unknown_vmap_method_is_refused(self: Any, method: str) -> None:
        listed = ", ".join(repr(m) for m in accepted_vmap_methods)
        with raises_exactly(ValueError, f"`vmap_method` must be one of {listed}, got {method!r}"):
            bridge.make(_outs(), vmap_method=method)

    namespace.update(
        test_op_is_named_after_the_kernel=test_op_is_named_after_the_kernel,
        test_compile_error_is_every_bridge_s=test_compile_error_is_every_bridge_s,
        test_unknown_vmap_method_is_refused=test_unknown_vmap_method_is_refused,
    )

    if bridge.vmap_methods is not None:

        def test_vmap_methods_are_the_kit_s(self: Any) -> None:
            if bridge.own_vmap_methods:
                assert bridge.vmap_methods == accepted_vmap_methods
            else:
                assert bridge.vmap_methods is VMAP_METHODS

        namespace["test_vmap_methods_are_the_kit_s"] = test_vmap_methods_are_the_kit_s

    if bridge.dtypes_kernels is not None:

        def test_dtype_messages(self: Any) -> None:
            import numpy as np

            bad = np.dtype(bridge.unsupported_dtype)
            refused = (
                f"has dtype {bad.name}, which {bridge.dtypes_kernels} do not take; "
                f"supported: {', '.join(bridge.supported_dtypes)}"
            )
            with raises_exactly(TypeError, f"`outs` entry 0 ({_outs(bad)!r}) {refused}"):
                bridge.make(_outs(bad))
            op = bridge.make(_outs())
            named = bridge.inputs_kernel or bridge.kernel
            with raises_exactly(TypeError, f"input 0 of {named} {refused}"):
                call(op)(np.zeros(8, bad))

        namespace["test_dtype_messages"] = test_dtype_messages

    if not bridge.differentiable:

        @pytest.mark.parametrize("transform", DIFFERENTIATION_TRANSFORMS)
        def test_differentiation_names_the_fix(self: Any, platform: Any, transform: str) -> None:
            op = call(bridge.make(_outs()))
            check_differentiation_refused(
                op, _vector(), kernel=bridge.kernel, transform=transform, fix=bridge.derivative_fix
            )

        namespace["test_differentiation_names_the_fix"] = test_differentiation_names_the_fix

    if not bridge.differentiable and bridge.batching:

        @pytest.mark.parametrize("transform", DIFFERENTIATION_TRANSFORMS)
        def test_differentiation_under_vmap_names_the_fix(
            self: Any, platform: Any, transform: str
        ) -> None:
            import jax
            import jax.numpy as jnp

            op = call(bridge.make(_outs(), vmap_method=bridge.vmap_method))
            x = _vector()
            check_differentiation_refused(
                jax.vmap(op),
                jnp.stack([x, x]),
                kernel=bridge.kernel,
                transform=transform,
                fix=bridge.derivative_fix,
            )

        namespace["test_differentiation_under_vmap_names_the_fix"] = (
            test_differentiation_under_vmap_names_the_fix
        )

    if not bridge.differentiable and bridge.sharding:

        def test_linear_transpose_of_a_sharded_call_names_the_fix(self: Any, platform: Any) -> None:
            # A call with a sharding rule goes through ffi_core's partitioned
            # call; transposing it runs the kernel's own rule, whose message
            # names it.
            op = call(bridge.make(_outs(), sharding_rule="elementwise"))
            check_differentiation_refused(
                op,
                _vector(),
                kernel=bridge.kernel,
                transform="linear_transpose",
                fix=bridge.derivative_fix,
            )

        namespace["test_linear_transpose_of_a_sharded_call_names_the_fix"] = (
            test_linear_transpose_of_a_sharded_call_names_the_fix
        )

    if bridge.cache_env is not None:
        cache_env = bridge.cache_env

        def test_cache_is_kept_out_of_the_user_s(
            self: Any, tmp_path_factory: pytest.TempPathFactory
        ) -> None:
            folder = os.environ.get(cache_env)
            assert folder, (
                f"${cache_env} is not set: the tests would fill the user's cache; point it "
                "at a temporary folder with ffi_core.testing.cache_dir_fixture in a conftest.py"
            )
            assert Path(folder).resolve().is_relative_to(tmp_path_factory.getbasetemp().resolve())

        namespace["test_cache_is_kept_out_of_the_user_s"] = test_cache_is_kept_out_of_the_user_s

    return type("BridgeConformance", (), namespace)
