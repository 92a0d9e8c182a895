"""downstream_csr: a CSR matrix-vector product as one JAX operation."""

from ._ops import csr_matvec as csr_matvec
from ._ops import random_csr as random_csr

__all__ = ["csr_matvec", "random_csr"]
