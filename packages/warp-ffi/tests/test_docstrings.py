"""The examples in warp_ffi's docstrings run and print what they show."""

from __future__ import annotations

import pkgutil

import pytest
import warp_ffi
from ffi_core.testing import check_docstring_examples

MODULES = sorted(info.name for info in pkgutil.walk_packages(warp_ffi.__path__, prefix="warp_ffi."))
WITH_EXAMPLES = {"warp_ffi._kernel", "warp_ffi._warp"}


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name: str) -> None:
    check_docstring_examples(module_name, expect_examples=module_name in WITH_EXAMPLES)
