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

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from ffi_core import (
    SUPPORTED_DTYPES,
    KernelDTypes,
    ShapedCall,
    check_aliases,
    check_inputs,
    check_sharding_rule,
    output_avals,
    partitioned_call,
    resolve_sharding_rule,
    shaped_values,
)
from ffi_core.cuda import CTYPES as _SCALARS
from ffi_core.cuda import LaunchPlan, LayoutBuilder, cuda_launch, launch_config

from ._nvrtc import compile_source, entry_params, headers, include_dirs_of
from ._signature import SourceParam, source_params

__all__ = ["CudaModule", "load_cuda_file", "load_cuda_inline"]

#: The dtypes an ``"in:dtype"`` / ``"out:dtype"`` pointer may declare.
_ARRAY_DTYPES = tuple(SUPPORTED_DTYPES)

#: The dtype table: what the checks accept and how their messages name the kernels.
_DTYPES = KernelDTypes(_ARRAY_DTYPES, "CUDA kernels")


def _parse_params(kernel: str, params: Any) -> tuple[tuple[str, str, str], ...]:
    """``params`` as ``(kind, name, dtype)``: ("in" or "out", "", dtype or "")
    for a pointer, (dtype, name, dtype) for a scalar."""
    if isinstance(params, str) or not isinstance(params, Sequence):
        raise TypeError(
            f"the parameters of kernel {kernel!r} must be a list of 'in', 'out' or "
            f"'name:dtype' strings, got {params!r}"
        )
    parsed = []
    for p in params:
        name, _, dtype = p.partition(":") if isinstance(p, str) else ("", "", "")
        if name in ("in", "out") and (not dtype or dtype in _ARRAY_DTYPES):
            parsed.append((name, "", dtype))
            continue
        if name in ("in", "out"):
            raise ValueError(
                f"parameter {p!r} of kernel {kernel!r} declares the element type of a "
                f"pointer, which must be one of {', '.join(_ARRAY_DTYPES)}"
            )
        if not name.isidentifier() or dtype not in _SCALARS:
            raise ValueError(
                f"parameter {p!r} of kernel {kernel!r} must be 'in', 'out' or 'name:dtype' "
                f"with dtype one of {', '.join(_SCALARS)}"
            )
        parsed.append((dtype, name, dtype))
    return tuple(parsed)


@dataclasses.dataclass(frozen=True)
class _Pointer:
    """One pointer parameter: the ``position`` among all parameters, its name
    in the source (empty when unread) and its element dtype ("" unchecked)."""

    position: int
    name: str
    dtype: str

    def describe(self) -> str:
        named = f" {self.name!r}" if self.name else ""
        return f"parameter {self.position}{named}"


def _typed(
    kernel: str, declared: tuple[tuple[str, str, str], ...], source: str
) -> tuple[tuple[_Pointer, ...], tuple[_Pointer, ...]]:
    """The input and output pointers of ``kernel``, with the types that its
    declaration and its C++ parameter list give (a ValueError where they differ)."""
    found = source_params(source, kernel)
    read: tuple[SourceParam | None, ...] = (
        found if found is not None and len(found) == len(declared) else (None,) * len(declared)
    )
    ins: list[_Pointer] = []
    outs: list[_Pointer] = []
    for position, ((kind, name, dtype), param) in enumerate(zip(declared, read, strict=True)):
        pointer = kind in ("in", "out")
        shown = f"{name or kind}:{dtype}" if dtype else kind
        if param is not None:
            what = None
            if param.pointer != pointer:
                what = "a pointer" if param.pointer else "not a pointer"
            elif dtype and param.dtype and param.dtype != dtype:
                what = f"a pointer to {param.dtype}" if pointer else param.dtype
            if what is not None:
                raise ValueError(
                    f"parameter {position} of kernel {kernel!r} is declared {shown!r}, but the "
                    f"source declares `{param.text}` ({what})"
                )
        if pointer:
            element = dtype or (param.dtype if param is not None and param.dtype else "")
            if element not in _ARRAY_DTYPES:
                element = ""  # a type arrays do not come in (e.g. char*): unchecked
            entry = _Pointer(position, param.name if param is not None else "", element)
            (ins if kind == "in" else outs).append(entry)
    return tuple(ins), tuple(outs)


def _scalar(label: str, name: str, dtype: str, value: Any) -> Any:
    """``value`` checked against scalar parameter ``name``'s declared ``dtype``."""
    if not isinstance(value, int | float | bool | np.generic):
        raise TypeError(
            f"{label}: scalar {name!r} must be a number (declared {dtype}), got "
            f"{type(value).__name__}"
        )
    kind = np.dtype(dtype).kind
    is_bool = isinstance(value, bool | np.bool_)
    if kind == "b":
        if not is_bool:
            raise TypeError(
                f"{label}: scalar {name!r} is declared bool, got {type(value).__name__} "
                f"{value}; pass True or False"
            )
        return bool(value)
    if is_bool:
        raise TypeError(
            f"{label}: scalar {name!r} is declared {dtype}, got a bool ({value}); pass a "
            "number (bools are not taken for numbers)"
        )
    if kind in "iu":
        if not isinstance(value, int | np.integer):
            raise TypeError(
                f"{label}: scalar {name!r} is declared {dtype}, got {type(value).__name__} "
                f"{value}; pass an int (a float is not truncated)"
            )
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:
            raise OverflowError(
                f"{label}: scalar {name!r} is {value}, outside the range of its declared "
                f"{dtype} [{info.min}, {info.max}]"
            )
        return int(value)
    if not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(
            f"{label}: scalar {name!r} is declared {dtype}, got {type(value).__name__} "
            f"{value}; pass a real number"
        )
    number = float(value)
    limit = float(np.finfo(dtype).max)
    if np.isfinite(number) and abs(number) > limit:
        raise OverflowError(
            f"{label}: scalar {name!r} is {value}, beyond the largest {dtype} ({limit:g})"
        )
    return number


@dataclasses.dataclass(frozen=True)
class _SourceKernel:
    """One kernel of a module, as the launcher plans it (hashable)."""

    source: str = dataclasses.field(repr=False)
    digest: str
    filename: str
    kernel: str
    params: tuple[tuple[str, str], ...]  # (kind, name), as CudaModule.kernels
    options: tuple[str, ...]
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    launch_dims: tuple[int, ...] | None
    threads_per_block: int
    shared_mem: int
    label: str

    def plan(self, inputs, outputs, batched: bool) -> LaunchPlan:
        del outputs, batched
        builder = LayoutBuilder()
        n_in = len(inputs)
        seen_in = seen_out = 0
        for kind, name in self.params:
            if kind == "in":
                builder.pointer(seen_in)
                seen_in += 1
            elif kind == "out":
                builder.pointer(n_in + seen_out)
                seen_out += 1
            else:
                builder.scalar(name, kind)
        layout = builder.build()
        launch = launch_config(
            grid=self.grid,
            block=self.block,
            launch_dims=self.launch_dims,
            threads_per_block=self.threads_per_block,
            shared_mem=self.shared_mem,
        )

        def image(cc: tuple[int, int]) -> tuple[bytes, str]:
            compiled = compile_source(
                self.source, name=self.filename, kernels=(self.kernel,), arch=cc,
                options=self.options,
            )  # fmt: skip
            sizes = entry_params(compiled, self.kernel)
            if sizes != layout.param_sizes:
                raise TypeError(
                    f"{self.label} is declared with parameters {_describe(self.params)} of "
                    f"sizes {layout.param_sizes} bytes, but its compiled entry takes "
                    f"{len(sizes)} parameters of sizes {sizes}"
                )
            return compiled.cubin, compiled.entries[self.kernel]

        parts = (self.digest, self.kernel, repr(self.options))
        return LaunchPlan(f"cuda_source.{_c_name(self.kernel)}", parts, layout, launch, image)


def _c_name(kernel: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in kernel)


def _describe(params: tuple[tuple[str, str], ...]) -> str:
    return "(" + ", ".join(k if not n else f"{n}:{k}" for k, n in params) + ")"


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
        if isinstance(options, str) or not all(isinstance(o, str) for o in options):
            raise TypeError(f"`options` must be a sequence of str, got {options!r}")
        self.source = source
        self.name = name
        self.options = tuple(options)
        # What the compiled code depends on: the source, its name (__FILE__),
        # the options (macros, include paths) and the headers it includes.
        found = headers(source, include_dirs_of(self.options))
        parts = [source, name, list(self.options), found.digest]
        self.digest = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]
        declared = {k: _parse_params(k, v) for k, v in kernels.items()}
        #: Each kernel's parameters, in order: ``("in", "")``, ``("out", "")``
        #: or ``(dtype, name)`` for a scalar.
        self.kernels = {k: tuple((kind, n) for kind, n, _ in v) for k, v in declared.items()}
        self._pointers = {k: _typed(k, v, source) for k, v in declared.items()}
        #: Each kernel's array element dtypes, inputs then outputs, as declared
        #: or read from the source ("" where neither says: unchecked).
        self.array_dtypes = {
            k: tuple(p.dtype for p in (*ins, *outs)) for k, (ins, outs) in self._pointers.items()
        }

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
        avals, rebuild = output_avals(outs, accepted=_DTYPES)
        aliases = check_aliases(input_output_aliases, len(avals))
        n_in = sum(k == "in" for k, _ in params)
        n_out = sum(k == "out" for k, _ in params)
        if n_out != len(avals):
            raise ValueError(
                f"{label} declares {n_out} output pointers ('out'), but `outs` has {len(avals)}"
            )
        for j, (pointer, aval) in enumerate(zip(out_ptrs, avals, strict=True)):
            if pointer.dtype and np.dtype(aval.dtype) != np.dtype(pointer.dtype):
                raise TypeError(
                    f"{label}: output {j} ({pointer.describe()}) is declared {pointer.dtype}, "
                    f"but `outs` gives {np.dtype(aval.dtype).name}"
                )
        scalars = {n: k for k, n in params if n}
        rule = check_sharding_rule(sharding_rule)
        if not callable(launch_dims):
            launch_config(  # a wrong launch fails here, before any call
                grid=grid, block=block, launch_dims=launch_dims,
                threads_per_block=threads_per_block, shared_mem=shared_mem,
            )  # fmt: skip

        def call(*args: Any, **values: Any) -> Any:
            if len(args) != n_in:
                raise TypeError(
                    f"{label} takes {n_in} inputs (its 'in' parameters), got {len(args)}"
                )
            unknown = sorted(set(values) - set(scalars))
            missing = [n for n in scalars if n not in values]
            if unknown or missing:
                raise TypeError(
                    f"{label} takes the scalar keywords {sorted(scalars)}; "
                    + (f"missing {missing}" if missing else f"unexpected {unknown}")
                )
            check_inputs(args, avals, aliases, name=label, accepted=_DTYPES)
            shaped_now = shaped_values(values, args)
            for n, dtype in scalars.items():
                _scalar(label, n, dtype, shaped_now[n])
            for i, (pointer, x) in enumerate(zip(in_ptrs, args, strict=True)):
                if pointer.dtype and np.dtype(x.dtype) != np.dtype(pointer.dtype):
                    raise TypeError(
                        f"{label}: input {i} ({pointer.describe()}) is declared "
                        f"{pointer.dtype}, got an array of {np.dtype(x.dtype).name}"
                    )
            resolved = resolve_sharding_rule(rule, args, avals, name=label, aliases=aliases)
            shaped = ShapedCall(launch_on, tuple(sorted(values.items())))
            return rebuild(tuple(partitioned_call(shaped, args, avals, resolved)))

        def launch_on(out_avals: Any, args: Any, values: dict[str, Any]) -> list[Any]:
            # The launch for these arrays: the whole ones, or a shard's.
            checked = {n: _scalar(label, n, dtype, values[n]) for n, dtype in scalars.items()}
            dims = launch_dims(dict(values)) if callable(launch_dims) else launch_dims
            launch = launch_config(
                grid=grid, block=block, launch_dims=dims,
                threads_per_block=threads_per_block, shared_mem=shared_mem,
            )  # fmt: skip
            planner = _SourceKernel(
                self.source,
                self.digest,
                self.name,
                kernel,
                params,
                self.options,
                None if launch.launch_dims else launch.grid,
                None if launch.launch_dims else launch.block,
                launch.launch_dims,
                threads_per_block,
                shared_mem,
                label,
            )
            attrs = tuple((n, scalars[n], checked[n]) for n in scalars)
            return cuda_launch(
                planner, args, out_avals, aliases=aliases, vmap_method=vmap_method, attrs=attrs
            )

        call.__name__ = _c_name(kernel)
        call.__doc__ = f"{label} as a JAX operation."
        return call


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
    with open(path, encoding="utf-8") as f:
        source = f.read()
    return CudaModule(source, kernels, name=os.path.basename(path), options=options)
