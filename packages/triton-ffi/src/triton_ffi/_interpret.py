"""Run a ``@triton.jit`` kernel on host numpy arrays in Triton's interpreter.

This is the CPU reference for a compiled kernel: the same Python function runs
program by program, each program's block operations as numpy operations, and
loads and stores go straight to the arrays' memory, so outputs land in place.

How it runs without ``TRITON_INTERPRET`` and without torch:
    ``triton.runtime.interpreter.InterpretedFunction`` is built directly from
    the kernel's Python function (``kernel.fn``); ``TRITON_INTERPRET=1`` would
    only make ``@triton.jit`` build that object at decoration time, for every
    kernel in the process. Its grid executor expects torch-like tensors: it
    reads ``data_ptr()`` and ``dtype`` to type each pointer, and "copies" each
    argument to the host and back through ``untyped_storage()``, ``cpu()``,
    ``new_empty()``, ``set_()`` and ``copy_()``. :class:`_HostTensor` answers
    those over a numpy array, whose memory already is host memory, so every
    copy is the identity. Torch is never imported.

What is patched, and for how long:
    Triton's interpreter itself swaps ``triton.language`` built-ins for
    interpreter versions during a run and restores them afterwards. The
    standard library (``tl.sum``, ``tl.cdiv``, ``tl.max``...) and any helper
    are ``@triton.jit`` functions, which refuse to be called outside a
    compiled kernel unless ``TRITON_INTERPRET`` was set at import; for the
    run, ``JITFunction.__call__`` therefore runs them interpreted too, and is
    restored afterwards. Because of these process-wide swaps, runs are
    serialized by a lock. Triton's rewriter also adds its interpreter helpers
    (``interpreter_builder``...) to the kernel module's globals, once.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import threading
import types
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._compile import DTYPES, check_constexprs

__all__ = ["run_interpreted"]

_LOCK = threading.Lock()


def run_interpreted(
    kernel: Any,
    grid: tuple[int, ...],
    args: Sequence[Any],
    constexprs: Mapping[str, object],
    num_warps: int = 4,
) -> None:
    """Run ``kernel`` over ``grid`` on host arrays, writing outputs in place.

    ``args`` gives, in order, every parameter that is not ``tl.constexpr``: a
    numpy array for a pointer (the kernel sees its data pointer; any strides
    are the kernel's to apply), or a scalar. A numpy scalar keeps its dtype; a
    Python ``float`` is passed as float32 and a Python ``int`` or ``bool`` by
    Triton's rules (int32 where it fits), as Triton's launcher types them.
    ``constexprs`` gives the ``tl.constexpr`` values (one with a default may be
    left out). ``num_warps`` is checked and otherwise ignored: the interpreter
    runs each program as whole-block numpy operations.
    """
    import triton
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(kernel, triton.JITFunction | InterpretedFunction):
        raise TypeError(
            "run_interpreted: kernel must be a @triton.jit function (triton.JITFunction), "
            f"got {type(kernel).__name__}"
        )
    if (
        not isinstance(grid, tuple)
        or not 1 <= len(grid) <= 3
        or not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in grid)
    ):
        raise TypeError(
            f"run_interpreted: grid must be a tuple of 1 to 3 non-negative ints, got {grid!r}"
        )
    if not isinstance(num_warps, int) or num_warps < 1 or num_warps & (num_warps - 1):
        raise ValueError(f"run_interpreted: num_warps must be a power of two, got {num_warps!r}")
    fn = kernel.fn
    call_args, call_constexprs = _bind(kernel, fn.__name__, args, constexprs)
    with _LOCK, _interpreted_jit_calls():
        _interpreted(fn).run(*call_args, grid=grid, warmup=False, **call_constexprs)


def _bind(
    kernel: Any, kname: str, args: Sequence[Any], constexprs: Mapping[str, object]
) -> tuple[list[Any], dict[str, object]]:
    """Check ``args`` and ``constexprs`` against the kernel's parameters and
    convert each argument to what the interpreter takes."""
    from triton.runtime.jit import KernelParam

    params = [
        KernelParam(i, p, False, False)
        for i, p in enumerate(inspect.signature(kernel.fn).parameters.values())
    ]
    runtime = [p.name for p in params if not p.is_constexpr]
    if isinstance(args, str | bytes) or not isinstance(args, Sequence):
        raise TypeError(
            f"run_interpreted: args must be a sequence of arrays and scalars, got {type(args).__name__}"
        )
    if len(args) != len(runtime):
        raise TypeError(
            f"run_interpreted: kernel {kname!r} takes {len(runtime)} arguments that are not "
            f"tl.constexpr ({runtime}), got {len(args)}"
        )
    if not isinstance(constexprs, Mapping):
        raise TypeError(
            f"run_interpreted: constexprs must be a dict of parameter name -> value, "
            f"got {type(constexprs).__name__}"
        )
    check_constexprs("run_interpreted", kname, params, constexprs)
    return [_convert(name, arg) for name, arg in zip(runtime, args, strict=True)], dict(constexprs)


def _convert(name: str, arg: Any) -> Any:
    """A numpy array as a :class:`_HostTensor`, a numpy scalar or Python float
    as a typed Triton scalar, a Python int or bool unchanged."""
    if isinstance(arg, np.ndarray):
        return _HostTensor(arg, _triton_dtype(name, arg.dtype))
    if isinstance(arg, np.generic):
        return _scalar(name, np.asarray(arg))
    if isinstance(arg, bool | int):
        return arg
    if isinstance(arg, numbers.Real):
        return _scalar(name, np.asarray(arg, dtype=np.float32))
    raise TypeError(
        f"run_interpreted: argument {name!r} must be a numpy array or a scalar, "
        f"got {type(arg).__name__}"
    )


def _triton_dtype(name: str, dtype: np.dtype) -> Any:
    """The ``triton.language`` dtype of a supported numpy dtype."""
    import triton.language as tl

    if dtype.name not in DTYPES:
        raise TypeError(
            f"run_interpreted: argument {name!r} has dtype {dtype.name}, which is not supported; "
            f"expected one of {', '.join(sorted(DTYPES))}"
        )
    return tl.str_to_ty(DTYPES[dtype.name][0], None)


def _scalar(name: str, value: np.ndarray) -> Any:
    """A 0-d numpy value as a Triton scalar tensor of the same dtype."""
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    ty = _triton_dtype(name, value.dtype)
    data = value.reshape(1)
    if value.dtype.name == "bfloat16":
        data = data.view(np.uint16)  # how the interpreter holds bfloat16 values
    return tl.tensor(TensorHandle(data, ty), ty)


@functools.cache
def _interpreted(fn: Any) -> Any:
    """One ``InterpretedFunction`` per Python function (it caches its rewrite).

    It interprets a copy of ``fn`` whose globals are a copy of the module's:
    Triton's rewriter adds its own module's globals to the globals of the
    function it rewrites, which then breaks compiling kernels of that module
    for a GPU (a compile after an interpreted run failed in the code generator).
    """
    from triton.runtime.interpreter import InterpretedFunction

    clone = types.FunctionType(
        fn.__code__, dict(fn.__globals__), fn.__name__, fn.__defaults__, fn.__closure__
    )
    clone.__kwdefaults__ = fn.__kwdefaults__
    clone.__qualname__ = fn.__qualname__
    clone.__module__ = fn.__module__
    clone.__annotations__ = dict(fn.__annotations__)
    clone.__doc__ = fn.__doc__
    return InterpretedFunction(clone)


class _interpreted_jit_calls:
    """Context in which calling a ``@triton.jit`` function runs it interpreted."""

    def __enter__(self) -> None:
        from triton.runtime.jit import JITFunction

        self._saved = JITFunction.__dict__["__call__"]
        JITFunction.__call__ = _call_interpreted

    def __exit__(self, *exc: object) -> None:
        from triton.runtime.jit import JITFunction

        JITFunction.__call__ = self._saved


def _call_interpreted(self: Any, *args: Any, **kwargs: Any) -> Any:
    # A @triton.jit helper (tl.sum, a user's @triton.jit function) called from
    # an interpreted kernel. InterpretedFunction.__call__ would patch
    # triton.language for the interpreter and never undo it, after which no
    # kernel compiles for a GPU in this process; patch for this call only.
    from triton.runtime.interpreter import _patch_lang

    interpreted = _interpreted(self.fn)
    scope = _patch_lang(interpreted.fn)
    try:
        return interpreted.rewrite()(*args, **kwargs)
    finally:
        scope.restore()


class _HostStorage:
    """The torch ``untyped_storage()`` answers the interpreter asks of a host array."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def data_ptr(self) -> int:
        return int(self.array.ctypes.data)

    def cpu(self) -> _HostStorage:
        return self  # already host memory

    def copy_(self, other: _HostStorage) -> None:
        if other.data_ptr() != self.data_ptr():  # pragma: no cover - never a distinct copy
            np.copyto(self.array, other.array)


class _HostTensor:
    """A numpy array with the torch-tensor methods Triton's interpreter calls.

    ``dtype`` is the ``triton.language`` dtype, which Triton accepts in place
    of a torch dtype when it types the pointer.
    """

    def __init__(self, array: np.ndarray, dtype: Any) -> None:
        self.array = array
        self.dtype = dtype

    def data_ptr(self) -> int:
        return int(self.array.ctypes.data)

    def untyped_storage(self) -> _HostStorage:
        return _HostStorage(self.array)

    def storage_offset(self) -> int:
        return 0

    def size(self) -> tuple[int, ...]:
        return self.array.shape

    def stride(self) -> tuple[int, ...]:
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def new_empty(self, *shape: Any, **kwargs: Any) -> _HostTensor:
        return _HostTensor(self.array, self.dtype)

    def set_(self, storage: _HostStorage, *layout: Any) -> _HostTensor:
        self.array = storage.array
        return self
