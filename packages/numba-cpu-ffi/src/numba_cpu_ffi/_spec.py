"""What a kernel call is: the kernel's identity and the dtype/rank signature.

One FFI target serves one (kernel, signature); shapes are read at run time, so
a signature never includes sizes. Everything here is checked before anything
is traced or bound.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import ffi_core
import ffi_core.bridge
from ffi_core.bridge import (
    BASIC_DTYPES,
    COMPLEX_DTYPES,
    check_kernel_type,
    function_kernel_fields,
)
from ffi_core.bridge import KernelInfo as KernelInfoBase
from numba.core.registry import CPUDispatcher

__all__ = ["DTYPES", "KIND", "SUPPORTED_DTYPES", "VMAP_METHODS", "CallSig", "KernelInfo"]

#: Dtypes a numba CPU kernel can take, by name: ffi-core's ``BASIC_DTYPES`` and
#: ``COMPLEX_DTYPES``, less float16: Numba has no float16 on CPU (any array of
#: it fails inside Numba's lowering).
SUPPORTED_DTYPES: tuple[str, ...] = (
    *(name for name in BASIC_DTYPES if name != "float16"),
    *COMPLEX_DTYPES,
)

#: The kernels, as dtype errors name them.
KIND = "numba CPU"

#: Accepted ``vmap_method`` values, ffi-core's (every bridge's); None is the
#: default, one native call looping over the batch.
VMAP_METHODS: tuple[str | None, ...] = ffi_core.bridge.VMAP_METHODS

#: The dtype table: what the checks accept and how their messages name the kernels.
DTYPES = ffi_core.bridge.KernelDTypes(SUPPORTED_DTYPES, "numba CPU kernels")


@dataclasses.dataclass(frozen=True)
class CallSig(ffi_core.bridge.CallSig):
    """ffi-core's signature, and ``context``: text appended to run-time error
    messages (it is part of the compiled handler, hence of the signature).

    The name stays ``CallSig``: its ``repr`` names the FFI target and the
    handler on disk.
    """

    context: str = ""
    #: The call carries one more input, a float32 scalar the handler ignores:
    #: the cost hint of large calls (``_primitive``). Not in the ``repr``, so
    #: a call without it is named by the ``repr`` alone; ``name_parts`` adds it.
    hint: bool = dataclasses.field(default=False, repr=False)
    #: The kernel is compiled with bounds checks (an index out of range
    #: raises IndexError): named like the hint, and only when set.
    boundscheck: bool = dataclasses.field(default=False, repr=False)

    def name_parts(self) -> tuple[str, ...]:
        """What names this signature's target and handler."""
        parts = (repr(self), "cost_hint") if self.hint else (repr(self),)
        return (*parts, "boundscheck") if self.boundscheck else parts

    def to_step(self) -> dict[str, Any]:
        """The signature as the JSON fields of an export recipe step."""
        return {
            **super().to_step(),
            "context": self.context,
            "hint": self.hint,
            **({"boundscheck": True} if self.boundscheck else {}),
        }


class KernelInfo(KernelInfoBase):
    """A validated ``@numba.njit`` kernel and a digest of its code.

    The digest (module, qualified name, bytecode, constants, closure values,
    globals the code reads; see ``ffi_core.bridge.kernel_digest``, with the
    target options) names its FFI targets and on-disk handlers, so they are
    the same in every process.
    """

    # A kernel of an XLACustomKernel takes its derivative from there.
    derivative_fix = ffi_core.bridge.derivative_fix(
        "`XLACustomKernel.def_jvp_rule` (and `def_transpose_rule` for reverse mode)"
    )

    def __init__(self, kernel: object) -> None:
        kernel = check_kernel_type(
            kernel,
            CPUDispatcher,
            "a @numba.njit function (a numba CPU dispatcher)",
            {"CUDADispatcher": "a numba.cuda.jit kernel use numba_cuda_ffi.numba_cuda_kernel"},
        )
        self.kernel = kernel
        py_func = kernel.py_func
        super().__init__(**function_kernel_fields(py_func, "numba kernel", kernel.targetoptions))
        self.parallel: bool = bool(kernel.targetoptions.get("parallel", False))
        #: captured values that make the digest differ per process (no export)
        self.address_bound = ffi_core.bridge.address_bound_values(py_func)
