"""CUDA C++ source as JAX GPU operations: ``load_cuda_inline`` / ``load_cuda_file``.

A kernel's parameters are declared once, in order: ``"in"`` / ``"in:dtype"``
(a pointer to the next input), ``"out"`` / ``"out:dtype"`` (a pointer to the
next output) or ``"name:dtype"`` (a scalar, a static keyword of each call that
travels as an FFI attribute). The element and scalar types are also read from
the kernel's C++ parameter list where it is written plainly (PTX keeps sizes
only); the two must agree, and each call's arrays and scalars are checked
against them. At lowering the source is compiled with NVRTC for each local
GPU's architecture (cached in memory and on disk), the declared layout is
checked against the compiled entry's parameters, and ffi-core's native
launcher launches it on XLA's stream.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
from ffi_core.bridge import KernelDTypes, KernelInfo, derivative_fix, kernel_op
from ffi_core.bridge.cuda import launch_config

from ._nvrtc import compile_source, headers, include_dirs_of
from ._params import ARRAY_DTYPES, parse_params, scalar_value, typed_pointers
from ._planner import SourceLaunch, c_name

__all__ = ["CudaModule", "load_cuda_file", "load_cuda_inline"]

#: The dtype table: what the checks accept and how their messages name the kernels.
_DTYPES = KernelDTypes(ARRAY_DTYPES, "CUDA kernels")
# What the refusal to differentiate a kernel says to do: a kernel of an
# XLACustomKernel takes its derivative from there.
_DERIVATIVE_FIX = derivative_fix(
    "`XLACustomKernel.def_jvp_rule` (and `def_transpose_rule` for reverse mode)"
)


class CudaModule:
    """CUDA C++ source and its declared kernels; :meth:`kernel` makes a JAX op."""

    def __init__(
        self,
        source: str,
        kernels: Mapping[str, Sequence[str]],
        *,
        name: str = "inline.cu",
        options: Sequence[str] = (),
    ) -> None:
        if not isinstance(source, str):
            raise TypeError(f"`source` must be a str of CUDA C++, got {type(source).__name__}")
        if not isinstance(kernels, Mapping) or not kernels:
            raise TypeError(
                "`kernels` must be a non-empty dict of kernel name -> parameter list "
                "('in', 'out' or 'name:dtype' each), e.g. {'axpy': ['in', 'in', 'out', "
                f"'a:float32', 'n:int32']}}; got {kernels!r}"
            )
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"`name` must be a non-empty str (the source's file name), got {name!r}"
            )
        if not all(isinstance(k, str) and k for k in kernels):
            raise TypeError(
                f"`kernels` must map kernel names (non-empty str) to parameter lists, got the "
                f"names {list(kernels)!r}"
            )
        if (
            isinstance(options, str | bytes)
            or not isinstance(options, Sequence)
            or not all(isinstance(o, str) for o in options)
        ):
            raise TypeError(f"`options` must be a sequence of str, got {options!r}")
        self.source = source
        self.name = name
        self.options = tuple(options)
        # What the compiled code depends on: the source, its name (__FILE__),
        # the options (macros, include paths) and the headers it includes.
        found = headers(source, include_dirs_of(self.options))
        parts = [source, name, list(self.options), found.digest]
        self.digest = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]
        declared = {k: parse_params(k, v) for k, v in kernels.items()}
        self._kernels = {k: tuple((kind, n) for kind, n, _ in v) for k, v in declared.items()}
        self._pointers = {k: typed_pointers(k, v, source) for k, v in declared.items()}
        self._array_dtypes = {
            k: tuple(p.dtype for p in (*ins, *outs)) for k, (ins, outs) in self._pointers.items()
        }

    @property
    def kernels(self) -> Mapping[str, tuple[tuple[str, str], ...]]:
        """Each kernel's parameters, in order: ``("in", "")``, ``("out", "")``
        or ``(dtype, name)`` for a scalar (read-only)."""
        return MappingProxyType(self._kernels)

    @property
    def array_dtypes(self) -> Mapping[str, tuple[str, ...]]:
        """Each kernel's array element dtypes, inputs then outputs, as declared
        or read from the source ("" where neither says: unchecked; read-only)."""
        return MappingProxyType(self._array_dtypes)

    def compile(self, arch: tuple[int, int]):
        """Compile every declared kernel for ``arch`` now (a ``CompiledSource``);
        compile errors arrive as :class:`NvrtcCompileError` with NVRTC's log."""
        return compile_source(
            self.source, name=self.name, kernels=tuple(self.kernels), arch=arch,
            options=self.options,
        )  # fmt: skip

    def kernel(
        self,
        kernel: str,
        outs: Any,
        *,
        grid: Any = None,
        block: Any = None,
        launch_dims: Any = None,
        threads_per_block: int = 256,
        shared_mem: int = 0,
        vmap_method: str | None = None,
        input_output_aliases: dict[int, int] | None = None,
        sharding_rule: Any = None,
    ) -> Callable[..., Any]:
        """The JAX operation ``op(*inputs, **scalars)`` launching ``kernel``.

        ``grid`` and ``block``, or ``launch_dims`` (total threads per axis,
        ``threads_per_block`` per block on one axis), as ints or tuples of up to
        3; ``launch_dims`` may also be a callable of the call's scalars (a
        dict). The kernel must check its bounds. A scalar may be given as a
        callable of the tuple of input shapes (``n=lambda shapes: shapes[0][0]``).

        ``sharding_rule`` (``"elementwise"``, Shardy's einsum-like notation such
        as ``"i j, j -> i"``, or an ``ffi_core.ShardingRule``): under a sharded
        ``jit`` each device launches the kernel on its shard; scalars given as
        callables of the shapes then get the shard's (a size passed as a plain
        number would stay the whole array's). None (default): XLA gathers
        sharded inputs and every device computes the whole result.

        Limitations: no derivative. ``jax.grad``, ``jax.jvp``, ``jax.vjp`` and
        ``jax.linear_transpose`` raise NotImplementedError naming the kernel;
        define one with ``XLACustomKernel.def_jvp_rule`` or wrap the operation
        in ``jax.custom_vjp``/``jax.custom_jvp``.
        """
        if kernel not in self.kernels:
            raise KeyError(
                f"{kernel!r} is not a kernel declared in `kernels` of {self.name!r}; declared: "
                f"{sorted(self.kernels)}"
            )
        params = self.kernels[kernel]
        in_ptrs, out_ptrs = self._pointers[kernel]
        label = f"CUDA kernel '{kernel}' of {self.name!r}"
        n_in = sum(k == "in" for k, _ in params)
        n_out = sum(k == "out" for k, _ in params)
        scalars = {n: k for k, n in params if n}
        if not callable(launch_dims):
            launch_config(  # a wrong launch fails here, before any call
                grid=grid, block=block, launch_dims=launch_dims,
                threads_per_block=threads_per_block, shared_mem=shared_mem,
            )  # fmt: skip

        def check_outs(avals: tuple[Any, ...]) -> None:
            if n_out != len(avals):
                raise ValueError(
                    f"{label} declares {n_out} output pointers ('out'), but `outs` has {len(avals)}"
                )
            for j, (pointer, aval) in enumerate(zip(out_ptrs, avals, strict=True)):
                if pointer.dtype and np.dtype(aval.dtype) != np.dtype(pointer.dtype):
                    raise TypeError(
                        f"{label}: output {j} ({pointer.describe()}) is declared "
                        f"{pointer.dtype}, but `outs` gives {np.dtype(aval.dtype).name}"
                    )

        def arity(n_args: int, n_outs: int) -> None:
            del n_outs  # checked against the declaration when wrapped
            if n_args != n_in:
                raise TypeError(f"{label} takes {n_in} inputs (its 'in' parameters), got {n_args}")

        def check_scalars(args: Sequence[Any], given: Mapping[str, Any]) -> Mapping[str, Any]:
            unknown = sorted(set(given) - set(scalars))
            missing = [n for n in scalars if n not in given]
            if unknown or missing:
                raise TypeError(
                    f"{label} takes the scalar keywords {sorted(scalars)}; "
                    + (f"missing {missing}" if missing else f"unexpected {unknown}")
                )
            return given

        def check_call(args: Sequence[Any], values: Mapping[str, Any]) -> None:
            for n, dtype in scalars.items():
                scalar_value(label, n, dtype, values[n])
            for i, (pointer, x) in enumerate(zip(in_ptrs, args, strict=True)):
                if pointer.dtype and np.dtype(x.dtype) != np.dtype(pointer.dtype):
                    raise TypeError(
                        f"{label}: input {i} ({pointer.describe()}) is declared "
                        f"{pointer.dtype}, got an array of {np.dtype(x.dtype).name}"
                    )

        info = KernelInfo(
            name=c_name(kernel),
            label=label,
            qualname=f"{self.name}:{kernel}",
            digest=self.digest,
            derivative_fix=_DERIVATIVE_FIX,
        )
        launch = SourceLaunch(
            self.source, self.digest, self.name, kernel, params, self.options,
            grid, block, launch_dims, threads_per_block, shared_mem,
        )  # fmt: skip
        return kernel_op(
            info,
            outs,
            # The module's part: its dtypes, launch and checks of the
            # declared parameters.
            dtypes=_DTYPES,
            launch=launch,
            check_outs=check_outs,
            arity=arity,
            scalars=check_scalars,
            check_call=check_call,
            # The user's options, checked by the kit.
            vmap_method=vmap_method,
            input_output_aliases=input_output_aliases,
            sharding_rule=sharding_rule,
        )


def load_cuda_inline(
    source: str,
    *,
    kernels: Mapping[str, Sequence[str]],
    name: str = "inline.cu",
    options: Sequence[str] = (),
) -> CudaModule:
    """CUDA C++ ``source`` with its ``kernels`` declared: ``{kernel name:
    parameter list}``, each parameter ``"in"`` or ``"in:dtype"`` (the next
    input's pointer), ``"out"`` or ``"out:dtype"`` (the next output's) or
    ``"name:dtype"`` (a scalar keyword of each call). A C++ name (a template
    instance such as ``"scale<float>"``) works too.

    Types: where the kernel's parameter list is written plainly in the source
    (``const float* x``, ``int n``), its types are read from it and must agree
    with the declaration (a ValueError otherwise); a pointer declared without
    a dtype takes the source's, and one neither gives is unchecked. Each call
    then refuses, with a TypeError naming the parameter, an array of another
    dtype, and a scalar of another kind: a float or a bool for an integer, a
    bool for a float, anything but a bool for a bool; a value outside the
    declared type's range is an OverflowError.

    Example:
        >>> module = load_cuda_inline(
        ...     'extern "C" __global__ void twice(const float* x, float* y, int n) {\\n'
        ...     "  int i = blockIdx.x * blockDim.x + threadIdx.x;\\n"
        ...     "  if (i < n) y[i] = 2 * x[i];\\n}\\n",
        ...     kernels={"twice": ["in", "out", "n:int32"]},
        ... )
        >>> module.kernels["twice"]
        (('in', ''), ('out', ''), ('int32', 'n'))
        >>> module.array_dtypes["twice"]  # read from the source
        ('float32', 'float32')
    """
    return CudaModule(source, kernels, name=name, options=options)


def load_cuda_file(
    path: str | os.PathLike[str],
    *,
    kernels: Mapping[str, Sequence[str]],
    options: Sequence[str] = (),
) -> CudaModule:
    """:func:`load_cuda_inline` of the file at ``path`` (its name in NVRTC's log)."""
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"`path` must be a str or os.PathLike naming a file, got {path!r}")
    with open(path, "rb") as f:
        data = f.read()
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"`path` {os.fspath(path)!r} is not UTF-8 text: {exc}") from None
    return CudaModule(source, kernels, name=os.path.basename(path), options=options)
