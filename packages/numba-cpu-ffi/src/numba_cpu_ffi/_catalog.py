"""The kernels this process knows, by digest, and how a target is made again.

Every kernel wrapped with ``numba_kernel`` is remembered by the digest of its
code (ffi-core's ``BridgeCatalog``), so that ``ffi_core.deserialize`` can make
the handlers of an exported function again in a new process: the recipe each
target records names the kernel's digest and the signature, and the
rebuilder here compiles that pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ffi_core.bridge import BridgeCatalog
from ffi_core.bridge.cpu import ensure_target
from ffi_core.export import StepField
from numba.core.registry import CPUDispatcher

from ._primitive import NumbaPlanner
from ._spec import CallSig, KernelInfo

__all__ = ["kernel_info"]

_catalog = BridgeCatalog(
    KernelInfo,
    kernel_type=CPUDispatcher,
    language="numba kernel",
    wrapper="numba_kernel",
    passed="the @numba.njit function",
)


def kernel_info(kernel: Any) -> KernelInfo:
    """The validated ``KernelInfo`` of ``kernel``, remembered by digest."""
    return _catalog.info(kernel)  # type: ignore[return-value]


def _rebuild(info: Any, sig: Any, step: Mapping[str, Any]) -> None:
    # numba-cpu-ffi's own CallSig (its cost hint names a target only when set).
    del sig
    own = CallSig.from_step(step)
    planner = NumbaPlanner(info, own.context, own.boundscheck)
    ensure_target(planner.plan(own.inputs, own.outputs, own.batched, own.hint))


#: What each "numba_cpu" step holds beyond the kernel and the signature
#: (``_codegen._recipe``), checked by ``ffi_core.deserialize`` before
#: ``_rebuild`` sees a step.
_catalog.register(
    "numba_cpu",
    _rebuild,
    extras={
        "context": StepField.text(),
        "hint": StepField.flag(),
        "boundscheck": StepField.added(StepField.flag()),
    },
    distribution="numba-cpu-ffi",
)
