"""One JAX primitive, many kernel backends: dispatch, defaults, batching and autodiff."""

import warnings as _warnings
from typing import Any as _Any

from ._adapters import BackendAdapter as BackendAdapter
from ._adapters import backend_adapters as backend_adapters
from ._adapters import register_backend_adapter as register_backend_adapter
from ._autodiff import NOT_DIFFERENTIABLE as NOT_DIFFERENTIABLE
from ._autodiff import defjvp as defjvp
from ._call_site import CallSite as CallSite
from ._chooser import CHOOSER_ENTRY_POINTS as CHOOSER_ENTRY_POINTS
from ._chooser import Chooser as Chooser
from ._chooser import find_chooser as find_chooser
from ._chooser import register_chooser as register_chooser
from ._chooser import registered_chooser as registered_chooser
from ._entry import BATCHING_MODES as BATCHING_MODES
from ._entry import KernelEntry as KernelEntry
from ._errors import BackendError as BackendError
from ._errors import BackendPreferenceWarning as BackendPreferenceWarning
from ._errors import DuplicateKernelError as DuplicateKernelError
from ._errors import KernelReplacedWarning as KernelReplacedWarning
from ._errors import NoKernelError as NoKernelError
from ._errors import ReplacedKernelError as ReplacedKernelError
from ._errors import UnknownBackendError as UnknownBackendError
from ._kernel import XLACustomKernel as XLACustomKernel
from ._platforms import BACKEND_PLATFORMS as BACKEND_PLATFORMS
from ._registry import get_all_primitive_names as get_all_primitive_names
from ._registry import get_kernel as get_kernel
from ._registry import get_primitives_by_tags as get_primitives_by_tags
from ._registry import get_registry as get_registry
from ._registry import registered_kernels as registered_kernels
from ._rules import general_batching_rule as general_batching_rule
from ._selection import clear_backends as clear_backends
from ._selection import get_backend as get_backend
from ._selection import set_backend as set_backend
from ._version import __version__ as __version__

__all__ = [
    "BACKEND_PLATFORMS",
    "BATCHING_MODES",
    "CHOOSER_ENTRY_POINTS",
    "NOT_DIFFERENTIABLE",
    "BackendAdapter",
    "BackendError",
    "BackendPreferenceWarning",
    "CallSite",
    "Chooser",
    "DuplicateKernelError",
    "KernelEntry",
    "KernelReplacedWarning",
    "NoKernelError",
    "ReplacedKernelError",
    "UnknownBackendError",
    "XLACustomKernel",
    "__version__",
    "backend_adapters",
    "clear_backends",
    "defjvp",
    "find_chooser",
    "general_batching_rule",
    "get_all_primitive_names",
    "get_backend",
    "get_kernel",
    "get_primitives_by_tags",
    "get_registry",
    "register_backend_adapter",
    "register_chooser",
    "registered_chooser",
    "registered_kernels",
    "set_backend",
]

# The names of the last release that have a new name: old name -> new name.
_RENAMED: dict[str, str] = {"PLATFORMS": "BACKEND_PLATFORMS", "get_chooser": "find_chooser"}


def __getattr__(name: str) -> _Any:
    new_name = _RENAMED.get(name)
    if new_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _warnings.warn(
        f"`{__name__}.{name}` is now `{__name__}.{new_name}` "
        f"(`from {__name__} import {new_name}`); the old name will be removed in the next "
        "minor release",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new_name]
