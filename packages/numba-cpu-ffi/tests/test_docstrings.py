"""The examples in numba_cpu_ffi's docstrings run and print what they show."""

from __future__ import annotations

import numba_cpu_ffi
import pytest
from ffi_core.testing import check_docstring_examples, package_modules

MODULES = package_modules(numba_cpu_ffi)
WITH_EXAMPLES = {"numba_cpu_ffi._codegen", "numba_cpu_ffi._kernel"}


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name: str) -> None:
    check_docstring_examples(module_name, expect_examples=module_name in WITH_EXAMPLES)
