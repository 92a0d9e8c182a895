"""The examples in a package's docstrings and README, run by its tests."""

from __future__ import annotations

import doctest
import importlib
import pathlib
import pkgutil
import re
import types

__all__ = ["check_docstring_examples", "package_modules", "readme_python_blocks"]

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


def package_modules(package: types.ModuleType) -> list[str]:
    """The dotted names of every module inside ``package``, sorted: what a
    package's docstring test parametrizes over, so a new module is checked
    without being listed.

    Example:
        >>> import ffi_core.testing
        >>> package_modules(ffi_core.testing)[:2]
        ['ffi_core.testing._conformance', 'ffi_core.testing._docstrings']
    """
    return sorted(
        info.name for info in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}.")
    )
