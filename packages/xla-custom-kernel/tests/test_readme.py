import os
import pathlib
import subprocess
import sys

import pytest
from ffi_core.testing import readme_python_blocks

PACKAGE = pathlib.Path(__file__).parents[1]
# What each example of the README must leave true, appended to its code.
CHECKS = [
    "\nassert scale.defaults == {'cpu': 'jax', 'gpu': 'jax', 'tpu': 'jax'}"
    "\nassert (f(x) == 2 * x).all()",
    "\nassert (f(x, 'pallas') == 2 * x + 1).all() and (f(x, 'numba') == 2 * x + 1).all()"
    "\nassert (jax.vmap(lambda x: affine(x, outs=out, backend='pallas'))"
    "(jnp.ones((3, 4), device=x.device)) == 3).all()"
    "\nassert (jax.grad(lambda x: affine(x, outs=out, backend='pallas').sum())(x) == 2).all()"
    "\nassert affine.available_backends('gpu') == ['pallas']",
    "\nassert (y == 2 * x).all() and double.get_default('cpu') == 'auto'"
    "\nassert decision.backend in ('jax', 'sum') and len(decision.candidates) == 2",
    "\nassert (op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)) == x + 1).all()"
    "\nassert op.available_backends('gpu') == ['my_lang']",
]


def test_readme_has_the_examples_checked_here():
    assert len(readme_python_blocks(PACKAGE)) == len(CHECKS)


# Examples that need kernel-bench (backend "auto"), absent where this package
# is installed alone.
NEEDS_KERNEL_BENCH = {2}


@pytest.mark.parametrize("index", range(len(CHECKS)))
def test_readme_example_runs(index, tmp_path):
    if index in NEEDS_KERNEL_BENCH:
        pytest.importorskip("kernel_bench")
    code = readme_python_blocks(PACKAGE)[index]
    # A fresh process: the example's kernel name is global to the process.
    env = {**os.environ, "KERNEL_BENCH_AUTOTUNE_DIR": str(tmp_path / "autotune")}
    result = subprocess.run(
        [sys.executable, "-c", code + CHECKS[index]],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr
