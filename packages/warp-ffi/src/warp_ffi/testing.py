"""Run warp-ffi's GPU path without a GPU: the emulated GPU of ffi-core's
launcher, each launch executed by Warp's CPU build of the same kernel.

Everything up to the driver is what a GPU machine runs: the lowering, the
kernel compiled by Warp for the emulated device's architecture (its cubin
written to Warp's kernel cache), the parameter layout of ``launch_bounds_t``
and ``array_t`` structs, the generated native handler called by XLA with its
buffer checks and packing, zeroed gradients aliased in the backward call. At
the launch, the bytes the handler packed for the CUDA entry (the launch bounds,
then each parameter's struct or scalar; backward, each adjoint too) are laid
out as the argument structs of the kernel's CPU entry point and Warp's CPU
code runs on them: a wrong pointer, shape, stride, scalar, bound or batch
offset gives a wrong result.

    >>> from ffi_core.bridge.cuda.testing import EmulatedGPU, emulate
    >>> gpu = on_cpu(EmulatedGPU())
    >>> with emulate(gpu, [LOWERING]):  # doctest: +SKIP
    ...     op(x, y, alpha=2.0)
"""

from __future__ import annotations

import ctypes
from typing import Any, cast

from . import _gpu, _primitive
from ._codegen import _param_offsets, load_kernel
from ._native import ARRAY_T
from ._warp import wp, wp_types

__all__ = ["LOWERING", "on_cpu"]

#: warp-ffi's CUDA lowering, registered on the CPU by ``emulate``.
LOWERING = (_primitive.warp_kernel_call_p, _primitive._cuda_lowering, _primitive._cpu_lowering)


def _stand_in(entry: str) -> Any:
    found = _gpu.ENTRIES.get(entry)
    if found is None:
        return None
    info, dtypes, backward = found
    loaded = load_kernel(info, dtypes)
    fn = loaded.backward if backward else loaded.forward
    if fn is None:
        raise AssertionError(f"warp kernel '{info.name}' has no CPU backward entry")
    offsets = _param_offsets(info)
    sizes = [ctypes.sizeof(wp_types._launch_bounds_classes[loaded.kernel_dim])]
    for p in info.params:
        # A scalar Param always has a dtype.
        sizes.append(
            ctypes.sizeof(ARRAY_T if p.is_array else getattr(wp, cast(str, p.dtype))._type_)
        )
    n = len(info.params)
    if backward:
        sizes += sizes[1:]
    signature = ctypes.CFUNCTYPE(None, *(ctypes.c_void_p,) * (3 if backward else 2))

    def run(launch: Any) -> None:
        bounds = ctypes.create_string_buffer(launch.raw[0], len(launch.raw[0]))
        structs = []
        for first in (1, 1 + n) if backward else (1,):
            struct = ctypes.create_string_buffer(offsets["<size>"])
            for p, raw in zip(info.params, launch.raw[first : first + n], strict=True):
                ctypes.memmove(ctypes.addressof(struct) + offsets[p.name], raw, len(raw))
            structs.append(struct)
        signature(fn)(bounds, *structs)

    return tuple(sizes), run


def on_cpu(gpu: Any) -> Any:
    """``gpu`` (an ``EmulatedGPU``) running warp-ffi's kernels with Warp's
    CPU build; chains with other bridges' stand-ins."""
    return gpu.add_stand_ins(lambda entry, image: _stand_in(entry))
