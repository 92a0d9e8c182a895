"""``jax.export`` round trips for functions that call this project's kernels
(semi-public: ``export``, ``serialize`` and ``deserialize`` are also at
ffi-core's root, for users; the rest is for bridge authors).

``export(fun)(*args)`` exports with every kernel target allowed,
``serialize(exported, key=None)`` writes a blob holding the payload and, per
FFI target, the recipe that rebuilds it, ``deserialize(blob, kernels=(),
key=None, isolate=False)`` checks the blob and rebuilds the targets in a fresh
process. A bridge records its recipe steps with ``record_recipe`` (or
``recipe_context``), declares their fields with ``StepField`` and registers
how to rebuild them with ``register_rebuilder`` (or an entry point of the group
``REBUILDER_ENTRY_POINTS``); ``KernelCatalog`` finds a step's kernel among
those the caller passes. The only layer that reads blobs: nothing read from
one chooses what is imported or called.

Changed only in minor releases, each change listed in the CHANGELOG.
"""

from ._deserialize import UnsignedBlobWarning as UnsignedBlobWarning
from ._deserialize import deserialize as deserialize
from ._export import custom_call_targets as custom_call_targets
from ._export import export as export
from ._export import recipe_context as recipe_context
from ._export import record_recipe as record_recipe
from ._export import register_kernel_acceptor as register_kernel_acceptor
from ._export import serialize as serialize
from ._kernel_catalog import KernelCatalog as KernelCatalog
from ._rebuilders import REBUILDER_ENTRY_POINTS as REBUILDER_ENTRY_POINTS
from ._rebuilders import register_rebuilder as register_rebuilder
from ._recipe import CALL_SIG_FIELDS as CALL_SIG_FIELDS
from ._recipe import ExportError as ExportError
from ._recipe import MissingKernelError as MissingKernelError
from ._recipe import StepField as StepField
from ._recipe import Unexportable as Unexportable

__all__ = [
    "CALL_SIG_FIELDS",
    "REBUILDER_ENTRY_POINTS",
    "ExportError",
    "KernelCatalog",
    "MissingKernelError",
    "StepField",
    "Unexportable",
    "UnsignedBlobWarning",
    "custom_call_targets",
    "deserialize",
    "export",
    "recipe_context",
    "record_recipe",
    "register_kernel_acceptor",
    "register_rebuilder",
    "serialize",
]
