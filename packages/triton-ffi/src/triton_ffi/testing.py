"""Run triton-ffi operations without a GPU: the emulated GPU of ffi-core's
launcher, with each compiled kernel's launch executed by Triton's interpreter.

Everything up to the driver is what a GPU machine runs: the wrapper's checks,
the lowering, the kernel compiled to PTX and cubin for the emulated device's
architecture, its parameter list checked against the PTX, the generated native
handler called by XLA with its buffer checks and parameter packing. The launch
then runs the same ``@triton.jit`` kernel in Triton's interpreter on the host
memory behind the pointers and scalars the handler packed, with the grid it
launched; a wrong pointer, scalar, grid or batch offset gives a wrong result.

    >>> from ffi_core.bridge.cuda.testing import EmulatedGPU, emulate
    >>> gpu = interpreted(EmulatedGPU())
    >>> with emulate(gpu, [LOWERING]):  # doctest: +SKIP
    ...     op(x, y, n=n)
"""

from __future__ import annotations

import hashlib
from typing import Any

from ffi_core.bridge.cuda import cuda_launch_cpu_lowering, cuda_launch_lowering, cuda_launch_p

from . import _planner
from ._interpret import run_interpreted

__all__ = ["LOWERING", "interpreted"]

#: The launcher primitive's CUDA lowering, registered on the CPU by ``emulate``.
LOWERING = (cuda_launch_p, cuda_launch_lowering, cuda_launch_cpu_lowering)


def _stand_in(image: bytes) -> Any:
    found = _planner._IMAGES.get(hashlib.sha256(image).hexdigest())
    if found is None:
        return None
    kernel, arrays, params = found
    sizes = tuple(p.size for p in params)

    def run(launch: Any) -> None:
        args = []
        for i, param in enumerate(params):
            if param.kind == "pointer":
                sig, shape = arrays[kernel.pointers.index(param.name)]
                args.append(launch.array(i, sig.dtype, shape))
            elif param.kind == "scalar":
                args.append(launch.value(i, param.dtype))
        grid = tuple(int(g) for g in launch.grid)
        run_interpreted(kernel.kernel, grid, args, dict(kernel.constexprs), kernel.num_warps)

    return sizes, run


def interpreted(gpu: Any) -> Any:
    """``gpu`` (an ``EmulatedGPU``) running triton-ffi's kernels in Triton's
    interpreter; chains with other bridges' stand-ins."""
    return gpu.add_stand_ins(lambda entry, image: _stand_in(image))
