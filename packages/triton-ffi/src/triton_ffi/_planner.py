"""How a Triton kernel is launched: the scalars' dtypes, the grid, and the
planner ffi-core's CUDA launcher builds the target from.

``_PlannedLaunch`` is ``triton_kernel``'s launch (see
``ffi_core.bridge.kernel_op``): for the arrays of one call (the whole ones,
or a shard's) it types the scalars, computes the grid and returns the
``Bind`` of ``ffi_core.bridge.cuda.cuda_launch_p`` with a ``TritonPlanner``,
which compiles the kernel for each local GPU (once per signature) at lowering.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np
from ffi_core.bridge import ArraySig, Bind, KernelCall
from ffi_core.bridge.cuda import (
    LaunchPlan,
    LayoutBuilder,
    cuda_launch_bind,
    launch_config,
    local_capabilities,
)

from ._compile import DTYPES, CompiledTriton, TritonCompileError, compile_triton

__all__ = ["TritonPlanner"]

#: Where each compiled image came from, for the emulated GPU of the tests
#: (``triton_ffi.testing``): image digest -> (kernel, arrays as the kernel
#: sees them, the compiled entry's parameters).
_IMAGES: dict[str, tuple[TritonPlanner, tuple[Any, ...], tuple[Any, ...]]] = {}
_IMAGES_LOCK = threading.Lock()


def _scalar_dtype(name: str, value: Any, label: str) -> str:
    """The dtype a scalar parameter is passed as (Triton's rules for Python
    values: bool, int32 where it fits else int64, float32)."""
    if isinstance(value, np.generic):
        dtype = value.dtype.name
    elif isinstance(value, bool):
        dtype = "bool"
    elif isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise OverflowError(
                f"{label}: scalar parameter {name!r} is {value}, outside the int64 range that "
                "Triton passes a Python int as; pass a NumPy scalar of the kernel's type "
                "(e.g. numpy.uint64) instead"
            )
        dtype = "int32" if -(2**31) <= value < 2**31 else "int64"
    elif isinstance(value, float):
        dtype = "float32"
    else:
        raise TypeError(
            f"{label}: scalar parameter {name!r} must be an int, a float, a bool or a NumPy "
            f"scalar, got {type(value).__name__}"
        )
    if dtype not in DTYPES:
        raise TypeError(
            f"{label}: scalar parameter {name!r} has dtype {dtype}; accepted: {', '.join(DTYPES)}"
        )
    return dtype


def _grid(grid: Any, meta: Mapping[str, Any], label: str) -> tuple[int, ...]:
    value = grid(dict(meta)) if callable(grid) else grid
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return (int(value),)
    if isinstance(value, tuple | list) and 1 <= len(value) <= 3:
        if all(isinstance(g, int | np.integer) and not isinstance(g, bool) for g in value):
            return tuple(int(g) for g in value)
    what = "`grid` must return" if callable(grid) else "`grid` must be"
    raise TypeError(
        f"{label}: {what} an int or a tuple of 1 to 3 ints (or `grid` a callable of the "
        f"meta-parameters returning one), got {value!r}"
    )


@dataclasses.dataclass(frozen=True, eq=False)
class TritonPlanner:
    """A ``@triton.jit`` kernel with its compile options: the planner ffi-core's
    CUDA launcher asks for the target of each signature."""

    kernel: Any
    name: str
    digest: str
    constexprs: tuple[tuple[str, Any], ...]
    num_warps: int
    num_stages: int
    pointers: tuple[str, ...]  # names of the pointer parameters (inputs, outputs)
    scalars: tuple[tuple[str, str], ...]  # (name, dtype) of the scalar parameters
    grid: tuple[int, int, int]
    label: str
    derivative_fix: str | None = None

    def _key(self) -> tuple[Any, ...]:
        return (
            id(self.kernel),
            self.digest,
            self.constexprs,
            self.num_warps,
            self.num_stages,
            self.pointers,
            self.scalars,
            self.grid,
        )

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TritonPlanner) and other._key() == self._key()

    def compile(self, dtypes: tuple[str, ...], cc: tuple[int, int], aligned: bool):
        signature = {n: "*" + d for n, d in zip(self.pointers, dtypes, strict=True)}
        signature.update(dict(self.scalars))
        return compile_triton(
            self.kernel,
            signature,
            dict(self.constexprs),
            cc=cc,
            num_warps=self.num_warps,
            num_stages=self.num_stages,
            aligned=aligned,
        )

    def plan(self, inputs, outputs, batched: bool) -> LaunchPlan:
        arrays: tuple[tuple[ArraySig, tuple[int, ...]], ...] = (*inputs, *outputs)
        dtypes = tuple(sig.dtype for sig, _ in arrays)
        builder = LayoutBuilder()
        compiled = self._compiled_everywhere(dtypes, not batched)
        for param in compiled.params:
            if param.kind == "pointer":
                builder.pointer(self.pointers.index(param.name))
            elif param.kind == "scalar":
                builder.scalar(param.name, param.dtype)
            else:  # the scratch pointers Triton appends: none is used
                builder.constant(0, "uint64")
        layout = builder.build()
        launch = launch_config(grid=self.grid, block=compiled.block, shared_mem=compiled.shared_mem)

        def image(cc: tuple[int, int]) -> tuple[bytes, str]:
            built = self.compile(dtypes, cc, not batched)
            if built.param_sizes != layout.param_sizes:
                raise TritonCompileError(
                    f"{self.label}: compiled for sm_{cc[0]}{cc[1]} with parameters of sizes "
                    f"{built.param_sizes}, not {layout.param_sizes}"
                )
            digest = hashlib.sha256(built.cubin).hexdigest()
            with _IMAGES_LOCK:
                _IMAGES[digest] = (self, tuple(arrays), built.params)
            return built.cubin, built.entry

        parts = (self.digest, repr(self.constexprs), f"w{self.num_warps}s{self.num_stages}")
        return LaunchPlan(f"triton.{self.name}", parts, layout, launch, image)

    def _compiled_everywhere(self, dtypes: tuple[str, ...], aligned: bool) -> CompiledTriton:
        """The kernel compiled for each local GPU; the launch they share."""
        first = None
        for cc in dict.fromkeys(local_capabilities(self.label)):
            compiled = self.compile(dtypes, cc, aligned)
            for size_name in ("global_scratch_size", "profile_scratch_size"):
                if getattr(compiled, size_name):
                    raise NotImplementedError(
                        f"{self.label} needs {getattr(compiled, size_name)} bytes of "
                        f"{size_name.removesuffix('_size').replace('_', ' ')} memory per "
                        f"program on sm_{cc[0]}{cc[1]} (for example for tensor "
                        "descriptors), which triton-ffi does not allocate"
                    )
            if first is None:
                first = compiled
            elif (compiled.shared_mem, compiled.block) != (first.shared_mem, first.block):
                raise NotImplementedError(
                    f"{self.label} compiles to different shared memory or block sizes on "
                    "this machine's GPUs; use GPUs of one architecture"
                )
        assert first is not None
        return first


@dataclasses.dataclass(frozen=True)
class _PlannedLaunch:
    """What a Triton kernel's call binds: ffi-core's CUDA launch, planned for
    the arrays it is given (the whole ones, or a shard's): the grid and the
    scalars' dtypes follow the call's scalar values."""

    kernel: Any
    constexprs: tuple[tuple[str, Any], ...]
    num_warps: int
    num_stages: int
    runtime: tuple[str, ...]  # the parameters that are not tl.constexpr
    grid: Any

    def __call__(self, call: KernelCall, out_avals: Any, args: Any, scalars: Any) -> Bind:
        info = call.info
        n_ptr = len(args) + len(out_avals)
        typed = tuple((s, _scalar_dtype(s, scalars[s], info.label)) for s in self.runtime[n_ptr:])
        launch_grid = _grid(self.grid, {**dict(self.constexprs), **scalars}, info.label)
        planner = TritonPlanner(
            self.kernel,
            info.name,
            info.digest,
            self.constexprs,
            self.num_warps,
            self.num_stages,
            self.runtime[:n_ptr],
            typed,
            (*launch_grid, *(1,) * (3 - len(launch_grid))),  # type: ignore[arg-type]
            info.label,
            info.derivative_fix,
        )
        attrs = tuple((s, d, scalars[s]) for s, d in typed)
        return cuda_launch_bind(planner, attrs=attrs, **call.options)
