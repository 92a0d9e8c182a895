"""How a kernel's generated callable is made again in another process.

Lowering records, around each backend's lowering, a recipe step naming the
kernel, platform, backend, outputs and static keywords
(``ffi_core.export.recipe_context``); the FFI targets the backend registers keep it.
``ffi_core.deserialize`` runs the step in a new process: it finds the kernel by
name (its module must be imported) and runs the generator again, which makes
the backend's kernel known to its bridge before the bridge's own step runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import ffi_core
import jax.numpy as jnp
from ffi_core.export import StepField, register_kernel_acceptor, register_rebuilder
from jax import core as jax_core

from ._entry import KernelEntry
from ._errors import UnknownBackendError
from ._registry import get_kernel, registered_kernels

__all__ = ["recipe_step"]


def recipe_step(name: str, entry: KernelEntry, outs, multiple: bool, static) -> dict[str, Any]:
    """The step that makes ``entry``'s callable for this call again."""
    return {
        "kind": "xla_custom_kernel",
        "module": "xla_custom_kernel",
        "op": name,
        "platform": entry.platform,
        "backend": entry.backend,
        # By name: NumPy's dtype string of bfloat16 is a bare "<V2".
        "outs": [[list(o.shape), jnp.dtype(o.dtype).name] for o in outs],
        "multiple": multiple,
        "static": static,
    }


def _rebuild(step: Mapping[str, Any]) -> None:
    name = step["op"]
    try:
        kernel = get_kernel(name)
    except KeyError:
        raise ffi_core.MissingKernelError(
            f"XLACustomKernel {name!r} is not defined here: import the module that creates it"
        ) from None
    try:
        entry = kernel._table.check_backend(step["platform"], step["backend"])
    except UnknownBackendError as exc:
        raise ffi_core.MissingKernelError(str(exc)) from None
    kernel._table.require(entry, "recorded in the exported program")
    outs = tuple(jax_core.ShapedArray(tuple(shape), jnp.dtype(dt)) for shape, dt in step["outs"])
    kernel._generator_cache.get(entry, outs, step["multiple"], step["static"])


def _accept(obj: object) -> bool:
    # Kernels are known by name from their creation on: nothing to remember.
    return any(obj is k for k in registered_kernels().values())


_StepField = StepField
#: What each field of an "xla_custom_kernel" step holds (``recipe_step``),
#: checked by ``ffi_core.deserialize`` before ``_rebuild`` sees a step.
_FIELDS = {
    "op": _StepField.text(),
    "platform": _StepField.text(64),
    "backend": _StepField.text(),
    "outs": _StepField.sequence(
        _StepField.items(
            _StepField.sequence(_StepField.integer(0, 2**62), max_len=64), _StepField.dtype()
        )
    ),
    "multiple": _StepField.flag(),
    "static": _StepField.sequence(_StepField.items(_StepField.text(), _StepField.value())),
}

register_rebuilder("xla_custom_kernel", _rebuild, fields=_FIELDS, distribution="xla-custom-kernel")
register_kernel_acceptor(_accept, what="an XLACustomKernel")
