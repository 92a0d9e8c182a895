"""The examples in kernel_bench's docstrings and README run and print what they show."""

from __future__ import annotations

import doctest
import importlib
import pathlib
import re

import pytest

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
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, verbose=False, report=False)
    assert result.failed == 0
    if module_name in WITH_EXAMPLES:
        assert result.attempted > 0


def test_readme_library_example(tmp_path, monkeypatch) -> None:
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(block, namespace)
    assert (tmp_path / "scale.json").is_file()
    assert (tmp_path / "scale.png").is_file()
