"""The toy CPU bridge of the README (tests/toy_ctypes): C functions compiled
with gcc, run through ffi_core.bridge.cpu and ffi_core.bridge under jit and vmap."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import shutil
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

HERE = pathlib.Path(__file__).parent
README = HERE.parent / "README.md"

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None, reason="the toy bridge compiles C with gcc"
)
pytest.importorskip(
    "numba", reason="ffi_core.bridge.cpu builds handlers with numba (ffi-core[native])"
)

ADD = """
#include <stdint.h>
void add(const float *x, const float *y, float *out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}
"""


@pytest.fixture(scope="module")
def toy():
    # The toy bridge is a package beside the tests, loaded by path (the tests
    # run with --import-mode=importlib, so it is not on sys.path).
    spec = importlib.util.spec_from_file_location(
        "toy_ctypes", HERE / "toy_ctypes" / "__init__.py", submodule_search_locations=[]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["toy_ctypes"] = module
    spec.loader.exec_module(module)
    yield module
    for name in [n for n in sys.modules if n == "toy_ctypes" or n.startswith("toy_ctypes.")]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def add(toy):
    return toy.c_kernel(toy.compile_c(ADD, "add"), jax.ShapeDtypeStruct((5,), jnp.float32))


def test_toy_bridge_runs_under_jit(add) -> None:
    x = jnp.arange(5, dtype=jnp.float32)
    np.testing.assert_array_equal(jax.jit(add)(x, 2 * x), 3 * x)
    np.testing.assert_array_equal(add(x, x), 2 * x)


@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0)])
def test_toy_bridge_runs_under_vmap(add, in_axes) -> None:
    xs = jnp.arange(15, dtype=jnp.float32).reshape(3, 5)
    y = jnp.ones(5, jnp.float32)
    args = tuple(xs if axis == 0 else y for axis in in_axes)
    expected = args[0] + args[1]
    np.testing.assert_array_equal(jax.jit(jax.vmap(add, in_axes=in_axes))(*args), expected)


def test_toy_bridge_checks_its_inputs(add) -> None:
    x = jnp.arange(4, dtype=jnp.float32)
    with pytest.raises(
        ValueError, match=re.escape("the inputs of C function 'add' must be of shape (5,)")
    ):
        add(x, x)


def test_toy_bridge_refuses_grad_naming_the_function(add) -> None:
    x = jnp.arange(5, dtype=jnp.float32)
    with pytest.raises(NotImplementedError, match=r"^C function 'add' has no JVP rule"):
        jax.grad(lambda x: add(x, x).sum())(x)


def test_toy_bridge_compile_error_names_the_function(toy) -> None:
    with pytest.raises(toy.CCompileError, match=r"^gcc does not compile the source of 'broken':"):
        toy.compile_c("void broken( {", "broken")


def _readme_block(title: str) -> str:
    text = README.read_text()
    match = re.search(rf"`{re.escape(title)}`:\n\n```python\n(.*?)```\n", text, re.S)
    assert match is not None, f"README.md has no python block after `{title}`:"
    return match.group(1)


@pytest.mark.parametrize("module", ["_compile.py", "_adapter.py"])
def test_readme_shows_the_toy_bridge_as_tested(module: str) -> None:
    assert _readme_block(f"toy_ctypes/{module}") == (HERE / "toy_ctypes" / module).read_text()
