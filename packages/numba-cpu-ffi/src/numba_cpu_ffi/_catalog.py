"""The kernels this process knows, by digest, and how a target is made again.

Every kernel wrapped with ``numba_kernel`` is remembered by the digest of its
code, so that ``ffi_core.deserialize`` can make the handlers of an exported
function again in a new process: the recipe each target records names the
kernel's digest and the signature, and the rebuilder here compiles that pair.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from typing import Any

import ffi_core
from numba.core.registry import CPUDispatcher

from ._codegen import ensure_target
from ._spec import CallSig, KernelInfo

__all__ = ["kernel_info"]

_lock = threading.Lock()
_known: dict[str, KernelInfo] = {}


@functools.cache
def kernel_info(kernel: Any) -> KernelInfo:
    """The validated ``KernelInfo`` of ``kernel``, remembered by digest."""
    info = KernelInfo(kernel)
    with _lock:
        _known.setdefault(info.digest, info)
    return info


def _rebuild(step: Mapping[str, Any]) -> None:
    with _lock:
        info = _known.get(step["digest"])
        same_name = [i for i in _known.values() if i.qualname == step["kernel"]]
    if info is None:
        if same_name:
            raise ffi_core.MissingKernelError(
                f"numba kernel {step['kernel']!r} is known here, but its code or the values it "
                "captures differ from the exported kernel's; import the version that was exported"
            )
        raise ffi_core.MissingKernelError(
            f"numba kernel {step['kernel']!r} is not known here: import the module that wraps "
            "it with numba_kernel, or pass the @numba.njit function in `kernels`"
        )
    ensure_target(info, CallSig.from_step(step))


def _accept(obj: object) -> bool:
    if not isinstance(obj, CPUDispatcher):
        return False
    kernel_info(obj)
    return True


ffi_core.register_rebuilder("numba_cpu", _rebuild)
ffi_core.register_kernel_acceptor(_accept)
