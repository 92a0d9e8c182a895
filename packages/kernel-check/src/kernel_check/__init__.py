"""kernel-check: ``check_kernel``, one call that checks an operation built on
ffi-core (a bridge's kernel, an ``XLACustomKernel``, any JAX callable) under
every JAX transform that applies, the report it returns, and the comparison
helpers (per-dtype tolerances, the first element that differs) that
kernel-bench holds backends to as well."""

from ._compare import TOLERANCES as TOLERANCES
from ._compare import first_difference as first_difference
from ._compare import max_difference as max_difference
from ._compare import tolerance as tolerance
from ._harness import CHECKS as CHECKS
from ._harness import check_kernel as check_kernel
from ._report import CheckReport as CheckReport
from ._report import CheckResult as CheckResult
from ._report import Status as Status
from ._version import __version__ as __version__

__all__ = [
    "CHECKS",
    "TOLERANCES",
    "CheckReport",
    "CheckResult",
    "Status",
    "__version__",
    "check_kernel",
    "first_difference",
    "max_difference",
    "tolerance",
]
