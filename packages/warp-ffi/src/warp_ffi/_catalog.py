"""The Warp kernels this process knows, by digest, and how a target is made again.

Every kernel wrapped with ``warp_kernel`` is remembered by the digest of its
code (ffi-core's ``BridgeCatalog``), so that ``ffi_core.deserialize`` can
make the handlers of an exported function again in a new process: each
target's recipe names the kernel's digest and the signature, and the
rebuilder here loads and registers that pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ffi_core
from ffi_core.bridge import BridgeCatalog
from ffi_core.export import StepField

from ._codegen import load_kernel
from ._inout import check_in_out_step
from ._primitive import make_target
from ._spec import CallSig, KernelInfo
from ._warp import wp

__all__ = ["kernel_info"]

_catalog = BridgeCatalog(
    KernelInfo,
    kernel_type=wp.Kernel,
    language="warp kernel",
    wrapper="warp_kernel",
    passed="the @wp.kernel",
    captured="reads",
)


def kernel_info(kernel: Any) -> KernelInfo:
    """The validated ``KernelInfo`` of ``kernel``, made once per kernel and
    remembered by digest."""
    return _catalog.info(kernel)  # type: ignore[return-value]


def _rebuild(info: Any, sig: Any, step: Mapping[str, Any]) -> None:
    # warp-ffi's own CallSig, which knows the kernel's arrays of a backward call.
    del sig
    sig = CallSig.from_step(step)
    check_in_out_step(info, sig)
    loaded = load_kernel(info, sig.primal_dtypes(), sig.block_dim, sig.boundscheck)
    if loaded.code_hash != step["code"]:
        raise ffi_core.MissingKernelError(
            f"warp kernel {step['kernel']!r} is known here, but a Warp function it calls "
            "differs from the exported kernel's; import the version that was exported"
        )
    make_target(info, sig)


#: What each "warp_cpu" step holds beyond the kernel and the signature
#: (``_codegen._recipe``), checked by ``ffi_core.deserialize`` before
#: ``_rebuild`` sees a step.
_catalog.register(
    "warp_cpu",
    _rebuild,
    extras={
        "backward": StepField.flag(),
        "hint": StepField.flag(),
        "grid_from_output": StepField.flag(),
        "in_out": StepField.added(StepField.sequence(StepField.integer(0, 1023))),
        "block_dim": StepField.added(StepField.integer(1, 1024)),
        "boundscheck": StepField.added(StepField.flag()),
    },
    fields={"code": StepField.digest()},
    distribution="warp-ffi",
)
