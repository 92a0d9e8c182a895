"""Checks that the packages built on ffi-core run in their tests: the examples in
their docstrings and READMEs.

Public so that each package's tests import one copy rather than carry their own;
kept to the standard library, so using it adds no test dependency beyond ffi-core,
which every package in this workspace already depends on (kernel-bench through
xla-custom-kernel and numba-cpu-ffi).
"""

from __future__ import annotations

import doctest
import importlib
import pathlib
import re

__all__ = ["check_docstring_examples", "readme_python_blocks"]

_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def check_docstring_examples(module_name: str, *, expect_examples: bool) -> doctest.TestResults:
    """Run the docstring examples of module ``module_name``; fail if one fails.

    ``expect_examples`` also fails a module that has none, so a module meant
    to carry examples cannot lose them unnoticed. Failing examples are printed
    by :mod:`doctest` as they run.

    Example:
        >>> check_docstring_examples("ffi_core._digest", expect_examples=True).failed
        0

    Raises:
        AssertionError: an example failed, or ``expect_examples`` and there are none.
    """
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, verbose=False, report=False)
    assert result.failed == 0, (
        f"{result.failed} of {result.attempted} docstring examples in {module_name} failed"
    )
    if expect_examples:
        assert result.attempted > 0, f"{module_name} has no docstring examples; expected some"
    return result


def readme_python_blocks(package_dir: str | pathlib.Path) -> list[str]:
    """The ```` ```python ```` blocks of ``package_dir/README.md``, in order."""
    readme = pathlib.Path(package_dir) / "README.md"
    return _PYTHON_BLOCK.findall(readme.read_text())
