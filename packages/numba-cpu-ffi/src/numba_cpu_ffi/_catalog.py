"""The kernels this process knows, by digest, and how a target is made again.

Every kernel wrapped with ``numba_kernel`` is remembered by the digest of its
code, so that ``ffi_core.deserialize`` can make the handlers of an exported
function again in a new process: the recipe each target records names the
kernel's digest and the signature, and the rebuilder here compiles that pair.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import ffi_core
from numba.core.registry import CPUDispatcher

from ._codegen import ensure_target
from ._spec import CallSig, KernelInfo

__all__ = ["kernel_info"]

_catalog = ffi_core.KernelCatalog("numba kernel", "numba_kernel", "the @numba.njit function")


@functools.cache
def kernel_info(kernel: Any) -> KernelInfo:
    """The validated ``KernelInfo`` of ``kernel``, remembered by digest."""
    info = KernelInfo(kernel)
    _catalog.remember(info)
    return info


def _rebuild(step: Mapping[str, Any]) -> None:
    ensure_target(_catalog.find(step), CallSig.from_step(step))


def _accept(obj: object) -> bool:
    if not isinstance(obj, CPUDispatcher):
        return False
    kernel_info(obj)
    return True


#: What each field of a "numba_cpu" step holds (``_codegen._recipe``), checked
#: by ``ffi_core.deserialize`` before ``_rebuild`` sees a step.
_FIELDS = {
    "kernel": ffi_core.StepField.text(),
    "digest": ffi_core.StepField.digest(),
    **ffi_core.CALL_SIG_FIELDS,
    "context": ffi_core.StepField.text(),
    "hint": ffi_core.StepField.flag(),
}

ffi_core.register_rebuilder("numba_cpu", _rebuild, fields=_FIELDS)
ffi_core.register_kernel_acceptor(_accept)
