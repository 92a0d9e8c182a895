"""The examples in the docstrings of xla-custom-kernel run."""

from __future__ import annotations

import pytest
from ffi_core.testing import check_docstring_examples

WITH_EXAMPLES = [
    "xla_custom_kernel._adapters",
    "xla_custom_kernel._kernel",
    "xla_custom_kernel._registry",
    "xla_custom_kernel._selection",
    "xla_custom_kernel.testing",
]


@pytest.mark.parametrize("module_name", WITH_EXAMPLES)
def test_docstring_examples(module_name: str) -> None:
    check_docstring_examples(module_name, expect_examples=True)
