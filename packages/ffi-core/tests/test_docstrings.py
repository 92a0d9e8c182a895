"""The examples in ffi_core's docstrings and README run and print what they show; and
ffi_core.testing, which checks that, fails when they do not."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
import types

import ffi_core
import ffi_core.bridge
import jax
import pytest
from ffi_core.testing import check_docstring_examples, package_modules, readme_python_blocks

MODULES = [
    name
    for name in package_modules(ffi_core)
    # ffi_core.native is the deprecated path of ffi_core.abi.native: both need numba.
    if not name.startswith(("ffi_core.abi.native", "ffi_core.native"))
    or importlib.util.find_spec("numba")
]
WITH_EXAMPLES = {
    "ffi_core.abi._api_version",
    "ffi_core._autodiff",
    "ffi_core._batching",
    "ffi_core.abi._capi",
    "ffi_core._checks",
    "ffi_core._digest",
    "ffi_core.abi._dtypes",
    "ffi_core.export._export",
    "ffi_core._jax_compat",
    "ffi_core.export._kernel_catalog",
    "ffi_core._outs",
    "ffi_core._registry",
    "ffi_core._rules",
    "ffi_core._spec",
    "ffi_core.bridge._catalog",
    "ffi_core.bridge._info",
    "ffi_core.bridge._op",
    "ffi_core.bridge.cpu._handler",
    "ffi_core.bridge.cuda._launch",
    "ffi_core.bridge.cuda._layout",
    "ffi_core.bridge.cuda._ptx",
    "ffi_core.testing",
    "ffi_core.testing._conformance",
    "ffi_core.testing._docstrings",
    "ffi_core.testing._messages",
    "ffi_core.testing._sharding",
}


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name: str) -> None:
    check_docstring_examples(module_name, expect_examples=module_name in WITH_EXAMPLES)


def test_readme_example() -> None:
    # The first block; the others are the toy bridge's modules, which
    # test_toy_bridge.py checks against the code it runs.
    block = readme_python_blocks(pathlib.Path(__file__).parents[1])[0]
    *body, last, shown = block.rstrip("\n").split("\n")
    namespace: dict[str, object] = {}
    # The example registers a CPU target; keep it on the CPU where a GPU is present.
    with jax.default_device(jax.devices("cpu")[0]):
        exec("\n".join(body), namespace)
        assert shown.startswith("# ")
        assert repr(eval(last, namespace)) == shown[2:]


def _module(monkeypatch, name: str, doc: str) -> str:
    module = types.ModuleType(name, doc)
    monkeypatch.setitem(sys.modules, name, module)
    return name


def test_check_docstring_examples_fails_on_a_failing_example(monkeypatch) -> None:
    name = _module(monkeypatch, "ffi_core_test_wrong_example", ">>> 1 + 1\n3\n")
    with pytest.raises(AssertionError, match="1 of 1 docstring examples in ffi_core_test_wrong"):
        check_docstring_examples(name, expect_examples=False)


def test_check_docstring_examples_fails_without_expected_examples(monkeypatch) -> None:
    name = _module(monkeypatch, "ffi_core_test_no_example", "No examples here.")
    assert check_docstring_examples(name, expect_examples=False).attempted == 0
    with pytest.raises(AssertionError, match="ffi_core_test_no_example has no docstring examples"):
        check_docstring_examples(name, expect_examples=True)


def test_readme_python_blocks(tmp_path) -> None:
    (tmp_path / "README.md").write_text(
        "# x\n\n```python\na = 1\n```\n\n```bash\nls\n```\n\n```python\nb = 2\nc = 3\n```\n"
    )
    assert readme_python_blocks(tmp_path) == ["a = 1\n", "b = 2\nc = 3\n"]
    assert readme_python_blocks(str(tmp_path)) == ["a = 1\n", "b = 2\nc = 3\n"]
