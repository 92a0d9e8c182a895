"""The examples in ffi_core's docstrings and README run and print what they show."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pathlib
import pkgutil
import re

import ffi_core
import jax
import pytest

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(ffi_core.__path__, prefix="ffi_core.")
    if not info.name.startswith("ffi_core.native") or importlib.util.find_spec("numba")
)
WITH_EXAMPLES = {
    "ffi_core._api_version",
    "ffi_core._batching",
    "ffi_core._capi",
    "ffi_core._digest",
    "ffi_core._dtypes",
    "ffi_core._registry",
    "ffi_core._spec",
}


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name: str) -> None:
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, verbose=False, report=False)
    assert result.failed == 0
    if module_name in WITH_EXAMPLES:
        assert result.attempted > 0


def test_readme_example() -> None:
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    *body, last, shown = block.rstrip("\n").split("\n")
    namespace: dict[str, object] = {}
    # The example registers a CPU target; keep it on the CPU where a GPU is present.
    with jax.default_device(jax.devices("cpu")[0]):
        exec("\n".join(body), namespace)
        assert shown.startswith("# ")
        assert repr(eval(last, namespace)) == shown[2:]
