"""``numba_cuda_callable``: a Python function that launches CUDA work, as a JAX op.

Python runs on every call by nature (the function may launch several kernels,
pick grids from shapes, allocate temporaries), so the handler is a Python FFI
handler: it binds the device XLA names in the call frame, wraps the buffers as
Numba device arrays, hands the function XLA's stream, and turns any exception
into an FFI error naming the function. Temporaries from :func:`temporary` are
allocated and freed on XLA's stream (``cuMemAllocAsync`` / ``cuMemFreeAsync``).
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import inspect
import threading
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from ffi_core.abi import CallFrame, python_handler
from ffi_core.bridge import (
    KernelCall,
    KernelInfo,
    check_dtype,
    function_digest,
    nondifferentiable_call,
    positional_count,
    register_target,
    target_name,
)

from ._driver import driver
from ._kernel import cuda_kernel_op
from ._runtime import numba_cuda
from ._spec import CALLABLE_VMAP_METHODS, DERIVATIVE_FIX, DTYPES

__all__ = ["numba_cuda_callable", "temporary"]


class _Temporaries:
    """Stream-ordered allocations of one call, freed on its stream at the end."""

    def __init__(self, stream: int) -> None:
        self.stream = stream
        self.pointers: list[int] = []

    def allocate(self, nbytes: int) -> int:
        ptr = driver().mem_alloc_async(max(nbytes, 1), self.stream)
        self.pointers.append(ptr)
        return ptr

    def free(self) -> None:
        drv = driver()
        while self.pointers:
            drv.mem_free_async(self.pointers.pop(), self.stream)


_current: contextvars.ContextVar[_Temporaries | None] = contextvars.ContextVar(
    "numba_cuda_ffi_temporaries", default=None
)


def _device_array(ptr: int, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    cuda = numba_cuda()
    if int(np.prod(shape, dtype=np.int64)) == 0:
        return cuda.device_array(shape, dtype)  # no memory: XLA may pass a null pointer
    interface = {
        "shape": tuple(shape),
        "typestr": dtype.str,
        "data": (ptr, False),
        "strides": None,
        "version": 3,
    }
    return cuda.from_cuda_array_interface(interface, owner=None, sync=False)


def temporary(shape: int | tuple[int, ...], dtype: Any) -> Any:
    """A Numba device array for scratch space inside a ``numba_cuda_callable``.

    It is allocated on XLA's stream and freed on that stream when the function
    returns, so it may be used by every kernel the function launches on the
    stream it is given, and must not be kept.

    Raises:
        RuntimeError: outside a call of a ``numba_cuda_callable`` function.
    """
    temps = _current.get()
    if temps is None:
        raise RuntimeError(
            "numba_cuda_ffi.temporary() allocates on the stream of a running "
            "numba_cuda_callable call; call it inside that function"
        )
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    resolved = check_dtype(dtype, "`temporary`", accepted=DTYPES)
    nbytes = int(np.prod(dims, dtype=np.int64)) * resolved.itemsize
    if nbytes == 0:
        return _device_array(0, dims, resolved)
    return _device_array(temps.allocate(nbytes), dims, resolved)


def _run(func: Any, frame: CallFrame) -> None:
    cuda = numba_cuda()
    ordinal = frame.device_ordinal()
    stream_ptr = frame.stream()
    with cuda.gpus[ordinal]:
        stream = cuda.external_stream(stream_ptr)
        arrays = [_device_array(b.data, b.shape, b.dtype) for b in frame.args + frame.rets]
        temps = _Temporaries(stream_ptr)
        token = _current.set(temps)
        try:
            func(*arrays, stream)
        finally:
            _current.reset(token)
            temps.free()


def _digest(func: Any) -> str:
    if inspect.isfunction(func):
        return function_digest(func)[:24]
    # Another callable (an object with __call__, a partial): named by its type;
    # _target numbers callables whose digests are equal.
    kind = type(func)
    return hashlib.sha256(f"{kind.__module__}.{kind.__qualname__}".encode()).hexdigest()[:24]


_lock = threading.Lock()
# Callables with equal digests (objects of one type) get distinct targets,
# numbered in the order they are first called.
_by_digest: dict[str, list[Any]] = {}
_targets: dict[int, str] = {}


def _target(func: Any, name: str) -> str:
    with _lock:
        if id(func) in _targets:
            return _targets[id(func)]
        digest = _digest(func)
        same = _by_digest.setdefault(digest, [])
        same.append(func)  # pinned with the handler: XLA may call it for the life of the process
        target = target_name(f"numba_cuda_callable.{name}", digest, len(same) - 1)
        handler = python_handler(
            lambda frame: _run(func, frame), name=f"numba cuda callable '{name}'"
        )
        register_target(
            target, handler, content=f"{digest}:{len(same) - 1}", platform="cuda", pin=(func,)
        )
        _targets[id(func)] = target
        return target


@dataclasses.dataclass(frozen=True)
class _FfiCall:
    # The callable's FFI call for given output avals (the shard's under a
    # sharding rule); hashable, so eager calls hit JAX's cache.
    target: str
    vmap_method: str
    aliases: tuple[tuple[int, int], ...]

    def __call__(self, out_avals: Any, *args: Any) -> list[Any]:
        return list(
            jax.ffi.ffi_call(
                self.target,
                [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in out_avals],
                vmap_method=self.vmap_method,
                input_output_aliases=dict(self.aliases) or None,
            )(*args)
        )


class _Launch:
    # Calls the function's FFI target, under a primitive whose JVP and
    # transpose rules name it (jax.ffi.ffi_call's primitive is every FFI
    # call's, and its own rules say only "not implemented"). Compared by
    # identity: one per wrapped function, which may not be hashable itself.

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func

    def __call__(self, call: KernelCall, out_avals: Any, args: Any, scalars: Any) -> Any:
        del scalars  # the function takes arrays only
        ffi = _FfiCall(
            _target(self.func, call.info.name), call.vmap_method or "sequential", call.aliases
        )
        return nondifferentiable_call(
            ffi, args, out_avals, label=call.info.label, fix=call.info.derivative_fix
        )


def numba_cuda_callable(
    func: Callable[..., Any],
    outs: Any,
    *,
    vmap_method: str | None = None,
    input_output_aliases: dict[int, int] | None = None,
    sharding_rule: Any = None,
) -> Callable[..., Any]:
    """Wrap a Python function that launches numba CUDA kernels as a JAX GPU op.

    ``func(in_1, ..., in_n, out_1, ..., out_m, stream)`` gets Numba device arrays
    over XLA's buffers and XLA's stream (a Numba stream): launch every kernel on
    it (``kernel[grid, block, stream](...)``) and write every output. Scratch
    space comes from :func:`temporary`, on the same stream. The function runs
    on the device XLA names for the call; an exception it raises reaches the
    caller as an error naming it. Python runs on each call and the call is not
    captured into CUDA graphs; for one kernel prefer ``numba_cuda_kernel``.

    Args:
        func: the function.
        outs: a ``jax.ShapeDtypeStruct``, a sequence or a pytree of them.
        vmap_method: as in ``jax.ffi.ffi_call``; None means ``"sequential"``.
        input_output_aliases: ``{input index: output index}``.
        sharding_rule: how ``func`` runs on shards under a sharded ``jit``
            (``"elementwise"``, Shardy's einsum-like notation such as
            ``"i j, j -> i"``, or an ``ffi_core.ShardingRule``): each device
            calls it with its local shards (arrays of the shard's shapes).
            None (default): XLA gathers sharded inputs and every device
            computes the whole result.

    Limitations:
        No derivative: ``jax.grad``, ``jax.jvp``, ``jax.vjp`` and
        ``jax.linear_transpose`` raise NotImplementedError naming the
        function; define one with ``XLACustomKernel.def_jvp_rule`` or wrap
        the operation in ``jax.custom_vjp``/``jax.custom_jvp``.

    Example (on a GPU):
        >>> from numba import cuda
        >>> @cuda.jit
        ... def scale(x, out):
        ...     i = cuda.grid(1)
        ...     if i < out.size:
        ...         out[i] = 2 * x[i]
        >>> def twice(x, out, stream):
        ...     tmp = temporary(x.shape, x.dtype)
        ...     scale[(x.size + 255) // 256, 256, stream](x, tmp)
        ...     scale[(x.size + 255) // 256, 256, stream](tmp, out)
        >>> f = numba_cuda_callable(twice, jax.ShapeDtypeStruct((8,), jnp.float32))  # doctest: +SKIP
        >>> f(jnp.ones(8, jnp.float32))  # doctest: +SKIP
    """
    if not callable(func):
        raise TypeError(f"`func` must be a callable, got {type(func)!r}")
    numba_cuda()
    name = getattr(func, "__name__", type(func).__name__)
    n_params = positional_count(func)
    info = KernelInfo(
        name=name,
        label=f"numba cuda callable '{name}'",
        qualname=f"{getattr(func, '__module__', None)}.{getattr(func, '__qualname__', name)}",
        digest=_digest(func),
        called=f"callable '{name}'",
        derivative_fix=DERIVATIVE_FIX,
    )

    def arity(n_in: int, n_out: int) -> None:
        if n_params is not None and n_params != n_in + n_out + 1:
            raise TypeError(
                f"callable '{name}' takes {n_params} arguments but is called with {n_in} "
                f"inputs and {n_out} outputs; the convention is "
                "func(in_1, ..., in_n, out_1, ..., out_m, stream)"
            )

    return cuda_kernel_op(
        info,
        outs,
        # The callable's part: its vmap methods, arity (with the stream),
        # launch through jax.ffi.
        vmap_methods=CALLABLE_VMAP_METHODS,
        arity=arity,
        launch=_Launch(func),
        # The user's options, checked by the kit.
        vmap_method=vmap_method,
        input_output_aliases=input_output_aliases,
        sharding_rule=sharding_rule,
    )
