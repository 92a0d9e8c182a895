"""The bundled suite: the example operations ``kernel-bench`` runs with no arguments."""

from __future__ import annotations

from xla_custom_kernel import XLACustomKernel

from ._axpy import axpy
from ._csr import csr_matmat, csr_matvec
from ._exp_trace import exp_trace
from ._lif import lif_step

__all__ = ["SUITE", "example_kernels"]

# The one list of what the suite runs, in the order it runs them: an example
# joins the suite by being added here, not by being imported.
SUITE: tuple[XLACustomKernel, ...] = (axpy, exp_trace, lif_step, csr_matvec, csr_matmat)


def example_kernels() -> list[XLACustomKernel]:
    """The example operations, in the order the suite runs them."""
    return list(SUITE)
