"""jax.export across processes: a function calling numba kernels is exported and
serialized in one process, and deserialized and called in another, which
makes the kernels' handlers again from the kernels it imports.

Both sides run in fresh processes, so nothing registered by the test process
(or by the exporting one) can make the importing side pass by accident.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import re
import subprocess
import sys

import ffi_core
import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from ffi_core.export import _blob, custom_call_targets
from numba_cpu_ffi import numba_kernel

KERNELS = """
import jax, jax.numpy as jnp, numba
from numba_cpu_ffi import numba_kernel
import xla_custom_kernel as xck

@numba.njit
def add(x, y, out):
    for i in range(x.size):
        out[i] = x[i] + y[i]

add_op = numba_kernel(add, jax.ShapeDtypeStruct((8,), jnp.float32))
add_big = numba_kernel(add, jax.ShapeDtypeStruct((2**16,), jnp.float32))  # with a cost hint

def make_scale(outs, factor):
    @numba.njit
    def scale(x, out):
        for i in range(x.size):
            out[i] = factor * x[i]
    return scale

scale = xck.XLACustomKernel("export_test_scale")
scale.def_numba_kernel(make_scale)
scale.def_jax_kernel(lambda outs, factor: lambda x: factor * x, platform="cpu")

@numba.njit
def sub(x, y, out):  # only wrapped inside a function: unknown until it runs
    for i in range(x.size):
        out[i] = x[i] - y[i]

def sub_op(x, y):
    return numba_kernel(sub, jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)

@numba.njit
def doblé(x, out):  # a name MLIR prints quoted, with escapes
    for i in range(x.size):
        out[i] = 2 * x[i]

doble_op = numba_kernel(doblé, jax.ShapeDtypeStruct((8,), jnp.float32))
"""

CHANGED = KERNELS.replace("out[i] = x[i] + y[i]", "out[i] = x[i] + 2 * y[i]")

# The blobs are signed, and read with the key, as a program that trusts them would.
KEY = b"integration tests: a 32-byte key"

EXPORT = (
    f"KEY = {KEY!r}\n"
    + """
import sys, jax, jax.numpy as jnp, ffi_core
import kernels

x = jnp.arange(8, dtype=jnp.float32)
xb = jnp.arange(24, dtype=jnp.float32).reshape(3, 8)
s8 = jax.ShapeDtypeStruct((8,), jnp.float32)
cases = {
    "plain": (lambda a: kernels.add_op(a, a), x),
    "vmap": (jax.vmap(lambda a: kernels.add_op(a, 1 + a)), xb),
    "op": (lambda a: kernels.scale(a, outs=s8, factor=3.0, backend="numba"), x),
    "op_vmap": (jax.vmap(lambda a: kernels.scale(a, outs=s8, factor=0.5)), xb),
    "sub": (lambda a: kernels.sub_op(a, 1 + a), x),
    "big": (lambda a: kernels.add_big(a, a), jnp.arange(2**16, dtype=jnp.float32)),
    "accent": (kernels.doble_op, x),
}
for name, (f, arg) in cases.items():
    with open(f"{name}.bin", "wb") as file:
        file.write(ffi_core.serialize(ffi_core.export(f)(arg), key=KEY))
print("exported")
"""
)

CALL = (
    f"KEY = {KEY!r}\n"
    + """
import sys, jax, jax.numpy as jnp, numpy as np, ffi_core
mode, names = sys.argv[1], sys.argv[2].split(",")
extra = []
if mode != "bare":
    import kernels
    extra = [kernels.sub] if mode == "given" else []
x = np.arange(8, dtype=np.float32)
xb = np.arange(24, dtype=np.float32).reshape(3, 8)
expect = {
    "plain": (x, 2 * x), "vmap": (xb, 2 * xb + 1), "op": (x, 3 * x),
    "op_vmap": (xb, 0.5 * xb), "sub": (x, np.full(8, -1, np.float32)),
    "big": (np.arange(2**16, dtype=np.float32), 2 * np.arange(2**16, dtype=np.float32)),
    "accent": (x, 2 * x),
}
for name in names:
    with open(f"{name}.bin", "rb") as file:
        blob = file.read()
    try:
        restored = ffi_core.deserialize(blob, kernels=extra, key=KEY)
    except ffi_core.MissingKernelError as exc:
        print(f"{name}: MissingKernelError: {exc}")
        continue
    arg, want = expect[name]
    np.testing.assert_array_equal(restored.call(arg), want)
    np.testing.assert_array_equal(jax.jit(restored.call)(arg), want)
    print(f"{name}: ok")
"""
)


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
    return result.stdout.splitlines()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A folder with the kernels module and the serialized functions."""
    cwd = tmp_path_factory.mktemp("export")
    (cwd / "kernels.py").write_text(KERNELS)
    assert _run(cwd, EXPORT) == ["exported"]
    return cwd


def test_a_new_process_calls_what_another_exported(exported):
    lines = _run(exported, CALL, "import", "plain,vmap,op,op_vmap,big,accent")
    assert lines == ["plain: ok", "vmap: ok", "op: ok", "op_vmap: ok", "big: ok", "accent: ok"]


def test_a_kernel_with_a_non_ascii_name_keeps_it_in_its_target(exported):
    blob = (exported / "accent.bin").read_bytes()
    (target,) = _blob.unpack(blob, KEY).targets
    assert target.startswith("numba_cpu.doblé_")


def _resealed(blob: bytes, edit) -> bytes:
    from ffi_core.export import _export

    unpacked = _blob.unpack(blob, KEY)
    targets, payload = unpacked.targets, unpacked.payload
    (target,) = targets
    (chain,) = targets[target]
    edit(chain[-1])
    manifest = {
        "targets": {target: [[{k: _export.to_json(v) for k, v in s.items()} for s in chain]]}
    }
    return _blob.pack(json.dumps(manifest).encode(), bytes(payload), KEY), target


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda step: step.update(inputs=[["float32", 100_000], ["float32", 1]]),
            "inputs` must be a list of at most 1024 [dtype name, rank] pairs",
        ),
        (
            lambda step: step.update(context=5),
            "context` must be a str of at most 4096 characters, got 5",
        ),
        (lambda step: step.update(digest="zz"), "digest` must be a hex digest, got 'zz'"),
        (lambda step: step.pop("hint"), "hint` is missing (a 'numba_cpu' step has it)"),
    ],
)
def test_a_crafted_numba_step_is_refused_before_anything_compiles(exported, edit, message):
    blob, target = _resealed((exported / "plain.bin").read_bytes(), edit)
    with pytest.raises(
        ffi_core.ExportError, match=re.escape(f"`targets[{target!r}][0][0].{message}")
    ):
        ffi_core.deserialize(blob, key=KEY)


def test_a_batched_list_shorter_than_the_inputs_is_refused_naming_the_field(exported):
    blob, target = _resealed(
        (exported / "plain.bin").read_bytes(), lambda step: step.update(batched=[True])
    )
    where = f"targets[{target!r}][0][0]"
    with pytest.raises(
        ffi_core.ExportError,
        match=re.escape(
            f"`{where}.batched` must have one item per item of `{where}.inputs` (2), got 1"
        ),
    ):
        ffi_core.deserialize(blob, key=KEY)


def test_a_kernel_wrapped_later_is_passed_in_kernels(exported):
    assert _run(exported, CALL, "given", "sub") == ["sub: ok"]
    (line,) = _run(exported, CALL, "import", "sub")
    assert line == (
        "sub: MissingKernelError: the exported function calls FFI target "
        f"{_target(line)!r}, which this process cannot make: numba kernel 'kernels.sub' is "
        "not known here: import the module that wraps it with numba_kernel, or pass the "
        "@numba.njit function in `kernels`"
    )


def _target(line: str) -> str:
    return re.search(r"FFI target '([^']+)'", line).group(1)


def test_missing_kernels_are_named(exported):
    lines = _run(exported, CALL, "bare", "plain,op")
    assert lines == [
        f"plain: MissingKernelError: the exported function calls FFI target "
        f"{_target(lines[0])!r}, which this process cannot make: numba kernel 'kernels.add' "
        "is not known here: import the module that wraps it with numba_kernel, or pass the "
        "@numba.njit function in `kernels`",
        f"op: MissingKernelError: the exported function calls FFI target "
        f"{_target(lines[1])!r}, which this process cannot make: XLACustomKernel "
        "'export_test_scale' is not defined here: import the module that creates it",
    ]


def test_a_changed_kernel_is_not_taken_for_the_exported_one(exported, tmp_path):
    for name in ("plain.bin", "vmap.bin"):
        (tmp_path / name).write_bytes((exported / name).read_bytes())
    (tmp_path / "kernels.py").write_text(CHANGED)
    lines = _run(tmp_path, CALL, "import", "plain,vmap")
    assert [line.split(":")[0] for line in lines] == ["plain", "vmap"]
    for line in lines:
        assert line.endswith(
            "which this process cannot make: numba kernel 'kernels.add' is known here, but "
            "its code or the values it captures differ from the exported kernel's; import "
            "the version that was exported"
        ), line


_libm = ctypes.CDLL(ctypes.util.find_library("m"))
c_sqrt = _libm.sqrt
c_sqrt.restype = ctypes.c_double
c_sqrt.argtypes = [ctypes.c_double]


@numba.njit
def _root(x, out):
    for i in range(x.size):
        out[i] = c_sqrt(x[i])


def test_a_kernel_whose_digest_holds_an_address_is_refused():
    x = jnp.arange(4, dtype=jnp.float32)
    op = numba_kernel(_root, jax.ShapeDtypeStruct(x.shape, x.dtype))
    np.testing.assert_allclose(op(x), np.sqrt(np.arange(4.0)), rtol=1e-6)
    exported = ffi_core.export(op)(x)
    (target,) = custom_call_targets(exported)
    with pytest.raises(
        ffi_core.ExportError,
        match=re.escape(
            f"FFI target {target!r} cannot be made again in another process: numba kernel "
            f"'{__name__}._root' captures values whose repr holds a memory address (global "
            "'c_sqrt' read by '_root' = <_FuncPtr object at 0x...>), so its digest differs in "
            "every process; make them module constants of a stable repr (numbers, strings, "
            "tuples, arrays) or pass them as arguments"
        ),
    ):
        ffi_core.serialize(exported)
