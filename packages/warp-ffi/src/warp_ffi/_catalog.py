"""The Warp kernels this process knows, by digest, and how a target is made again.

Every kernel wrapped with ``warp_kernel`` is remembered by the digest of its
code, so that ``ffi_core.deserialize`` can make the handlers of an exported
function again in a new process: each target's recipe names the kernel's
digest and the signature, and the rebuilder here loads and registers that pair.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from typing import Any

import ffi_core

from ._codegen import load_kernel
from ._primitive import make_target
from ._spec import CallSig, KernelInfo
from ._warp import wp

__all__ = ["kernel_info"]

_lock = threading.Lock()
_infos: weakref.WeakKeyDictionary[Any, KernelInfo] = weakref.WeakKeyDictionary()
_catalog = ffi_core.KernelCatalog("warp kernel", "warp_kernel", "the @wp.kernel", "reads")


def kernel_info(kernel: Any) -> KernelInfo:
    """The validated ``KernelInfo`` of ``kernel``, made once per kernel and
    remembered by digest."""
    with _lock:
        info = _infos.get(kernel) if isinstance(kernel, wp.Kernel) else None
    if info is None:
        info = KernelInfo(kernel)
        with _lock:
            info = _infos.setdefault(kernel, info)
        _catalog.remember(info)
    return info


def _rebuild(step: Mapping[str, Any]) -> None:
    info = _catalog.find(step)
    sig = CallSig.from_step(step)
    loaded = load_kernel(info, sig.primal_dtypes())
    if loaded.code_hash != step["code"]:
        raise ffi_core.MissingKernelError(
            f"warp kernel {step['kernel']!r} is known here, but a Warp function it calls "
            "differs from the exported kernel's; import the version that was exported"
        )
    make_target(info, sig)


def _accept(obj: object) -> bool:
    if not isinstance(obj, wp.Kernel):
        return False
    kernel_info(obj)
    return True


#: What each field of a "warp_cpu" step holds (``_codegen._recipe``), checked
#: by ``ffi_core.deserialize`` before ``_rebuild`` sees a step.
_FIELDS = {
    "kernel": ffi_core.StepField.text(),
    "digest": ffi_core.StepField.digest(),
    "code": ffi_core.StepField.digest(),
    **ffi_core.CALL_SIG_FIELDS,
    "backward": ffi_core.StepField.flag(),
    "hint": ffi_core.StepField.flag(),
    "grid_from_output": ffi_core.StepField.flag(),
}

ffi_core.register_rebuilder("warp_cpu", _rebuild, fields=_FIELDS)
ffi_core.register_kernel_acceptor(_accept)
