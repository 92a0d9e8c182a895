"""The native handler of one kernel signature, made by ffi-core's CUDA launcher.

Numba's array ABI becomes a parameter layout: each array argument is the
8-byte fields ``meminfo, parent, nitems, itemsize, data, shape[ndim],
strides[ndim]`` (meminfo and parent 0: XLA owns the memory), read from the
call frame per launch. Everything else (the metadata handshake, checks, the
device table, the context, ``cuLaunchKernel`` on XLA's stream, batches and
errors naming the kernel) is :mod:`ffi_core.bridge.cuda`'s.
"""

from __future__ import annotations

import numpy as np
from ffi_core.bridge.cuda import (
    MAX_DEVICES,
    Handler,
    LaunchSpec,
    LayoutBuilder,
    NativeDriver,
    ParamLayout,
    build_launch_handler,
)

from ._compile import param_layout
from ._launch import LaunchConfig
from ._spec import CallSig

__all__ = ["MAX_DEVICES", "Handler", "build_numba_launch_handler", "launch_spec", "numba_layout"]


def numba_layout(sig: CallSig) -> ParamLayout:
    """The parameter layout of Numba's array ABI for ``sig``'s arrays."""
    arrays = sig.kernel_arrays
    builder = LayoutBuilder()
    for slot in param_layout(arrays):
        offset = builder.param(8)
        k = slot.array
        if slot.field in ("meminfo", "parent"):
            builder.field(offset, "int64", "const", value=0)
        elif slot.field == "itemsize":
            builder.field(offset, "int64", "const", value=np.dtype(arrays[k].dtype).itemsize)
        elif slot.field == "nitems":
            builder.field(offset, "int64", "nitems", buffer=k)
        elif slot.field == "data":
            builder.field(offset, "uint64", "data", buffer=k)
        elif slot.field == "shape":
            builder.field(offset, "int64", "dim", buffer=k, axis=slot.axis)
        else:  # strides, in bytes
            itemsize = np.dtype(arrays[k].dtype).itemsize
            builder.field(offset, "int64", "stride", buffer=k, axis=slot.axis, value=itemsize)
    return builder.build()


def launch_spec(sig: CallSig, launch: LaunchConfig) -> LaunchSpec:
    """What the launcher generates the handler of ``sig`` and ``launch`` for."""
    n_in = len(sig.inputs)
    lead = None
    if sig.batched is not None:
        lead = tuple(bool(b) for b in sig.batched) + (True,) * len(sig.outputs)
    return LaunchSpec(sig.inputs + sig.outputs, n_in, numba_layout(sig), launch, lead)


def build_numba_launch_handler(
    sig: CallSig, launch: LaunchConfig, label: str, native: NativeDriver
) -> Handler:
    """Compile the handler of ``sig`` and ``launch`` against ``native``'s entry points."""
    return build_launch_handler(launch_spec(sig, launch), label, native)
