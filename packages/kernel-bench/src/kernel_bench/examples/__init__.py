"""The bundled example operations: each an ``XLACustomKernel`` with a Numba
backend and a pure-JAX reference (``"jax"``), plus ``jax.experimental.sparse``
for the sparse products and, where warp-ffi is installed, a Warp backend for
``axpy``, ``lif_step`` and the sparse products.

- ``axpy``: ``a * x + y`` (elementwise);
- ``exp_trace``: ``trace * exp(-dt / tau) + spikes`` (elementwise, linear);
- ``csr_matvec`` / ``csr_matmat``: a CSR sparse matrix times a dense vector /
  matrix, with JVP and transpose rules (gradients with respect to the values
  and the dense operand);
- ``lif_step``: one Euler step of leaky integrate-and-fire neurons, returning
  the new potentials (float32) and the spikes (bool).

They are models for your own operations and the suite ``kernel-bench`` runs
with no arguments. Sizes of the benchmark data follow :func:`set_scale`.
"""

from ._axpy import axpy as axpy
from ._csr import csr_matmat as csr_matmat
from ._csr import csr_matvec as csr_matvec
from ._csr import random_csr as random_csr
from ._exp_trace import exp_trace as exp_trace
from ._lif import lif_step as lif_step
from ._scale import SCALES as SCALES
from ._scale import get_scale as get_scale
from ._scale import set_scale as set_scale
from ._suite import example_kernels as example_kernels

__all__ = [
    "SCALES",
    "axpy",
    "csr_matmat",
    "csr_matvec",
    "example_kernels",
    "exp_trace",
    "get_scale",
    "lif_step",
    "random_csr",
    "set_scale",
]
