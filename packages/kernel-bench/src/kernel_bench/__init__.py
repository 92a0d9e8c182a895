"""kernel-bench: time every backend of a kernel, see which wins, keep the numbers."""

from . import autotune as autotune
from ._compare import compare as compare
from ._config import BenchmarkConfig as BenchmarkConfig
from ._kernel import PLATFORMS as PLATFORMS
from ._kernel import ResultMismatchError as ResultMismatchError
from ._kernel import benchmark_kernel as benchmark_kernel
from ._kernel import default_platform as default_platform
from ._progress import ProgressBar as ProgressBar
from ._record import BenchmarkRecord as BenchmarkRecord
from ._result import BenchmarkResult as BenchmarkResult
from ._timing import Timing as Timing
from ._timing import benchmark_function as benchmark_function
from ._version import __version__ as __version__

__all__ = [
    "PLATFORMS",
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
