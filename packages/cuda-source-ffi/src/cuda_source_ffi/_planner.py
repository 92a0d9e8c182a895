"""How one kernel of a module is launched: the planner ffi-core's CUDA launcher
builds its target from, and the launch ``CudaModule.kernel`` hands it to.

At lowering the source is compiled with NVRTC for each local GPU's
architecture (cached in memory and on disk), the declared layout is checked
against the compiled entry's parameters, and ffi-core's native launcher
launches it on XLA's stream.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ffi_core.bridge import KernelCall
from ffi_core.bridge.cuda import LaunchPlan, LayoutBuilder, cuda_launch_bind, launch_config

from ._nvrtc import compile_source, entry_params
from ._params import scalar_value

__all__ = ["SourceKernel", "SourceLaunch", "c_name"]


@dataclasses.dataclass(frozen=True)
class SourceKernel:
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
    derivative_fix: str | None = None

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
        return LaunchPlan(f"cuda_source.{c_name(self.kernel)}", parts, layout, launch, image)


def c_name(kernel: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in kernel)


def _describe(params: tuple[tuple[str, str], ...]) -> str:
    return "(" + ", ".join(k if not n else f"{n}:{k}" for k, n in params) + ")"


@dataclasses.dataclass(frozen=True)
class SourceLaunch:
    """``CudaModule.kernel``'s launch (see ``ffi_core.bridge.kernel_op``): for
    the arrays of one call (the whole ones, or a shard's) it checks the
    scalars, computes the launch and hands a ``SourceKernel`` planner to
    ffi-core's CUDA launcher."""

    source: str = dataclasses.field(repr=False)
    digest: str
    filename: str
    kernel: str
    params: tuple[tuple[str, str], ...]
    options: tuple[str, ...]
    grid: Any
    block: Any
    launch_dims: Any  # may be a callable of the call's scalars
    threads_per_block: int
    shared_mem: int

    def __call__(self, call: KernelCall, out_avals: Any, args: Any, scalars: Any) -> Any:
        label = call.info.label
        declared = {n: kind for kind, n in self.params if n}
        checked = {n: scalar_value(label, n, dtype, scalars[n]) for n, dtype in declared.items()}
        dims = self.launch_dims(dict(scalars)) if callable(self.launch_dims) else self.launch_dims
        launch = launch_config(
            grid=self.grid, block=self.block, launch_dims=dims,
            threads_per_block=self.threads_per_block, shared_mem=self.shared_mem,
        )  # fmt: skip
        planner = SourceKernel(
            self.source,
            self.digest,
            self.filename,
            self.kernel,
            self.params,
            self.options,
            None if launch.launch_dims else launch.grid,
            None if launch.launch_dims else launch.block,
            launch.launch_dims,
            self.threads_per_block,
            self.shared_mem,
            label,
            call.info.derivative_fix,
        )
        attrs = tuple((n, declared[n], checked[n]) for n in declared)
        return cuda_launch_bind(planner, attrs=attrs, **call.options)
