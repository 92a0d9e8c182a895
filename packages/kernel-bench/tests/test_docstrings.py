"""The examples in kernel_bench's docstrings and README run and print what they show."""

from __future__ import annotations

import pathlib

import pytest
from ffi_core.testing import check_docstring_examples, readme_python_blocks

MODULES = [
    "kernel_bench._compare",
    "kernel_bench._config",
    "kernel_bench._kernel",
    "kernel_bench._result",
    "kernel_bench._timing",
]
WITH_EXAMPLES = {
    "kernel_bench._compare",
    "kernel_bench._config",
    "kernel_bench._result",
    "kernel_bench._timing",
}


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name: str) -> None:
    check_docstring_examples(module_name, expect_examples=module_name in WITH_EXAMPLES)


def test_readme_library_example(tmp_path, monkeypatch) -> None:
    blocks = readme_python_blocks(pathlib.Path(__file__).parents[1])
    assert blocks
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(block, namespace)
    assert (tmp_path / "scale.json").is_file()
    assert (tmp_path / "scale.png").is_file()
