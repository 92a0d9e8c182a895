"""How a numba kernel plans into ffi-core's CPU primitive, ``cpu_call_p``.

Every numba kernel call binds ``ffi_core.cpu.cpu_call_p`` with a
:class:`NumbaPlanner`; lowering asks the planner for the target of the exact
dtypes and ranks it sees, so a kernel that is vmapped with ``expand_dims`` is
compiled for the batched ranks rather than fed buffers it was not compiled
for. ``numba_kernel_call_p`` is that same primitive, named in numba-cpu-ffi's
API.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ffi_core.cpu import CpuPlan, cpu_call_p

from ._codegen import plan
from ._spec import CallSig, KernelInfo

__all__ = ["NumbaPlanner", "numba_kernel_call_p"]

#: The primitive of every numba kernel call: ``ffi_core.cpu.cpu_call_p``.
numba_kernel_call_p = cpu_call_p


@dataclasses.dataclass(frozen=True)
class NumbaPlanner:
    """A numba kernel as ``cpu_call_p`` runs it: its ``info``, the
    ``context`` its run-time errors carry and whether it is compiled with
    bounds checks."""

    info: KernelInfo
    context: str = ""
    boundscheck: bool = False

    @property
    def label(self) -> str:
        return self.info.label

    def plan(self, inputs: Any, outputs: Any, batched: Any, hint: bool) -> CpuPlan:
        return plan(
            self.info, CallSig(inputs, outputs, batched, self.context, hint, self.boundscheck)
        )
