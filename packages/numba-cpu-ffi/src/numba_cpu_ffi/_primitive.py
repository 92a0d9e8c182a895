"""How a numba kernel plans into ffi-core's CPU primitive, ``cpu_call_p``.

Every numba kernel call binds ``ffi_core.bridge.cpu.cpu_call_p`` with a
:class:`NumbaPlanner`; lowering asks the planner for the target of the exact
dtypes and ranks it sees, so a kernel that is vmapped with ``expand_dims`` is
compiled for the batched ranks rather than fed buffers it was not compiled
for, and ``ffi_core.bridge.cpu.ensure_target`` asks it to ``build`` the
handler of that signature once per process.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ffi_core.bridge.cpu import BoundHandler, CpuPlan

from ._codegen import compiled_handler, prepare_handler, target_plan
from ._spec import CallSig, KernelInfo

__all__ = ["NumbaPlanner"]


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

    @property
    def derivative_fix(self) -> str | None:
        return self.info.derivative_fix

    def plan(self, inputs: Any, outputs: Any, batched: Any, hint: bool) -> CpuPlan:
        sig = CallSig(inputs, outputs, batched, self.context, hint, self.boundscheck)
        return target_plan(self, self.info, sig)

    def build(self, sig: CallSig) -> BoundHandler:
        """The entry point of the kernel's target for ``sig``."""
        return compiled_handler(self.info, sig)[1]

    def prepare(
        self, sig: CallSig, handler: BoundHandler, work: int | None, rows: int | None
    ) -> None:
        """Compile the kernel's forms a call of ``work`` elements in ``rows``
        rows needs."""
        prepare_handler(self.info, sig, handler, work, rows)
