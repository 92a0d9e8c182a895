"""The examples in warp_ffi's docstrings run and print what they show."""

from __future__ import annotations

import pytest
import warp_ffi
from ffi_core.testing import check_docstring_examples, package_modules

MODULES = package_modules(warp_ffi)
WITH_EXAMPLES = {"warp_ffi._kernel", "warp_ffi._warp"}


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name: str) -> None:
    check_docstring_examples(module_name, expect_examples=module_name in WITH_EXAMPLES)
