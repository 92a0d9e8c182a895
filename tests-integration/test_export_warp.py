"""jax.export of functions calling Warp kernels, across processes: exported in
one fresh process, deserialized and called in another, which makes the
handlers again from the kernels it imports (forward, vmapped and the adjoint
of a grad)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("warp_ffi")

KERNELS = """
import jax, jax.numpy as jnp, warp as wp
from warp_ffi import warp_kernel
wp.config.log_level = wp.LOG_WARNING

@wp.func
def times(alpha: float, x: float):
    return alpha * x

@wp.kernel
def axpy(x: wp.array(dtype=float), y: wp.array(dtype=float), alpha: float,
         out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = times(alpha, x[i]) + y[i]

axpy_op = warp_kernel(axpy, jax.ShapeDtypeStruct((8,), jnp.float32))
"""

# The kernel's own code is unchanged; only a Warp function it calls differs.
CHANGED = KERNELS.replace("return alpha * x", "return alpha * x + 1.0")

EXPORT = """
import jax, jax.numpy as jnp, ffi_core
import kernels

x = jnp.arange(8, dtype=jnp.float32)
xb = jnp.arange(24, dtype=jnp.float32).reshape(3, 8)
cases = {
    "plain": (lambda a: kernels.axpy_op(a, a, alpha=2.0), x),
    "vmap": (jax.vmap(lambda a: kernels.axpy_op(a, 1 + a, alpha=0.5)), xb),
    "grad": (jax.grad(lambda a: (kernels.axpy_op(a, a, alpha=3.0) ** 2).sum()), x),
}
for name, (f, arg) in cases.items():
    with open(f"{name}.bin", "wb") as file:
        file.write(ffi_core.serialize(ffi_core.export(f)(arg)))
print("exported")
"""

CALL = """
import sys, jax, numpy as np, ffi_core
if sys.argv[1] == "import":
    import kernels
x = np.arange(8, dtype=np.float32)
xb = np.arange(24, dtype=np.float32).reshape(3, 8)
expect = {"plain": (x, 3 * x), "vmap": (xb, 1.5 * xb + 1), "grad": (x, 2 * 4 * x * 4)}
for name in sys.argv[2].split(","):
    with open(f"{name}.bin", "rb") as file:
        blob = file.read()
    try:
        restored = ffi_core.deserialize(blob)
    except ffi_core.MissingKernelError as exc:
        print(f"{name}: MissingKernelError: {exc}")
        continue
    arg, want = expect[name]
    np.testing.assert_allclose(jax.jit(restored.call)(arg), want)
    print(f"{name}: ok")
"""


def _run(cwd, program, *args):
    result = subprocess.run(
        [sys.executable, "-c", program, *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(cwd)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    return [line for line in result.stdout.splitlines() if not line.startswith("Warp")]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("export_warp")
    (cwd / "kernels.py").write_text(KERNELS)
    assert _run(cwd, EXPORT) == ["exported"]
    return cwd


def test_a_new_process_calls_what_another_exported(exported):
    assert _run(exported, CALL, "import", "plain,vmap,grad") == [
        "plain: ok",
        "vmap: ok",
        "grad: ok",
    ]


def test_a_missing_warp_kernel_is_named(exported):
    (line,) = _run(exported, CALL, "bare", "plain")
    target = re.search(r"FFI target '([^']+)'", line).group(1)
    assert line == (
        f"plain: MissingKernelError: the exported function calls FFI target {target!r}, "
        "which this process cannot make: warp kernel 'kernels.axpy' is not known here: "
        "import the module that wraps it with warp_kernel, or pass the @wp.kernel in `kernels`"
    )


def test_a_changed_warp_function_is_not_taken_for_the_exported_one(exported, tmp_path):
    (tmp_path / "plain.bin").write_bytes((exported / "plain.bin").read_bytes())
    (tmp_path / "kernels.py").write_text(CHANGED)
    (line,) = _run(tmp_path, CALL, "import", "plain")
    assert line.endswith(
        "which this process cannot make: warp kernel 'kernels.axpy' is known here, but a "
        "Warp function it calls differs from the exported kernel's; import the version that "
        "was exported"
    ), line
