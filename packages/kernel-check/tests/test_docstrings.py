"""The examples in kernel_check's docstrings and README run and print what they show."""

from __future__ import annotations

import pathlib

import kernel_check
import pytest
from ffi_core.testing import check_docstring_examples, package_modules, readme_python_blocks

MODULES = package_modules(kernel_check)
WITH_EXAMPLES = {
    "kernel_check._compare",
    "kernel_check._harness",
    "kernel_check._report",
}


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name: str) -> None:
    check_docstring_examples(module_name, expect_examples=module_name in WITH_EXAMPLES)


def test_readme_example() -> None:
    # The block defines a pytest test; run it as pytest would.
    (block,) = readme_python_blocks(pathlib.Path(__file__).parents[1])
    namespace: dict[str, object] = {}
    exec(block, namespace)
    test = namespace["test_scale"]
    assert callable(test)
    test()
