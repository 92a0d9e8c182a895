"""The examples in numba_cuda_ffi's docstrings run and print what they show.

Examples that need a GPU are marked ``# doctest: +SKIP``; the rest (defining
kernels, parameter layouts, launch configurations) run on any machine.
"""

from __future__ import annotations

import numba_cuda_ffi
import pytest
from ffi_core.testing import check_docstring_examples, package_modules

MODULES = package_modules(numba_cuda_ffi)
WITH_EXAMPLES = {
    "numba_cuda_ffi._callable",
    "numba_cuda_ffi._compile",
    "numba_cuda_ffi._kernel",
}


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name: str) -> None:
    check_docstring_examples(module_name, expect_examples=module_name in WITH_EXAMPLES)
