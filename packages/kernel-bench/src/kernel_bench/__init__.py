"""kernel-bench: time every backend of a kernel, see which wins, keep the numbers."""

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from ._compare import compare as compare
from ._config import BACKEND_PLATFORMS as BACKEND_PLATFORMS
from ._config import BenchmarkConfig as BenchmarkConfig
from ._console import ProgressBar as ProgressBar
from ._record import BenchmarkRecord as BenchmarkRecord
from ._result import BenchmarkResult as BenchmarkResult
from ._version import __version__ as __version__

if TYPE_CHECKING:
    from . import autotune as autotune
    from ._kernel import ResultMismatchError as ResultMismatchError
    from ._kernel import benchmark_kernel as benchmark_kernel
    from ._kernel import default_platform as default_platform
    from ._timing import Timing as Timing
    from ._timing import benchmark_function as benchmark_function

__all__ = [
    "BACKEND_PLATFORMS",
    "BenchmarkConfig",
    "BenchmarkRecord",
    "BenchmarkResult",
    "ProgressBar",
    "ResultMismatchError",
    "Timing",
    "__version__",
    "autotune",
    "benchmark_function",
    "benchmark_kernel",
    "compare",
    "default_platform",
]

# The names that need JAX are imported on first use, so that the `kernel-bench`
# command answers `--help` (and usage errors) without starting JAX. Backend
# "auto" finds the autotuner through its entry point, not through this import.
_NEED_JAX = {
    "autotune": ".autotune",
    "ResultMismatchError": "._kernel",
    "benchmark_kernel": "._kernel",
    "default_platform": "._kernel",
    "Timing": "._timing",
    "benchmark_function": "._timing",
}


# The names of the last release that have a new name: old name -> new name.
_RENAMED: dict[str, str] = {"PLATFORMS": "BACKEND_PLATFORMS"}


def __getattr__(name: str) -> Any:
    new_name = _RENAMED.get(name)
    if new_name is not None:
        warnings.warn(
            f"`{__name__}.{name}` is now `{__name__}.{new_name}` "
            f"(`from {__name__} import {new_name}`); the old name will be removed in the "
            "next minor release",
            DeprecationWarning,
            stacklevel=2,
        )
        return globals()[new_name]
    module = _NEED_JAX.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = importlib.import_module(module, __name__)
    if name != "autotune":
        value = getattr(value, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
