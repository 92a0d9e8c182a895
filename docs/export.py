"""Tutorial 5: export a function that calls numba kernels; call it in another process.

Run it: ``uv run python docs/export.py``. It exports and serializes three
functions, then starts a fresh copy of itself that reads them back and calls
them. Every step asserts its result, so this file doubles as a test (CI runs it).

``jax.export`` writes a function as StableHLO; a numba kernel appears in it only
as an FFI target name. The process that calls it must have registered the
kernel's handler first. Plain ``jax.export.export`` refuses such a function
("Cannot serialize code with custom calls whose targets have no compatibility
guarantees"); ``ffi_core.export`` takes the same arguments and exports it. ``ffi_core.export`` / ``ffi_core.serialize`` record,
beside JAX's bytes, how each target was made (the kernel's digest and its
dtype/rank signature; for an ``XLACustomKernel``, also the generator call);
``ffi_core.deserialize`` makes the targets again from the kernels the new
process defines (by importing the module that wraps them, or given in
``kernels=``), and names any kernel it cannot find. Last, ``check_kernel``
checks the two ops under every transform that applies.

A blob is a program, like a pickle: deserialize only blobs you trust. The
writer signs each blob with a secret key (``serialize(exported, key=key)``,
an HMAC-SHA256 over everything in it) and the reader gives the same key
(``deserialize(blob, key=key)``), which refuses a blob that is not signed,
or was changed after signing, before any of its bytes reaches jaxlib.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile

import ffi_core
import jax
import jax.numpy as jnp
import numba
import numpy as np
import xla_custom_kernel as xck
from ffi_core.export import custom_call_targets
from numba_cpu_ffi import numba_kernel
from xla_custom_kernel.testing import check_kernel

# --- The kernels: in a real program, a module both processes import ---------


@numba.njit
def axpy(x, y, out):
    for i in range(x.size):
        out[i] = 2.0 * x[i] + y[i]


axpy_op = numba_kernel(axpy, jax.ShapeDtypeStruct((8,), jnp.float32))


def clip_generator(outs, limit):
    @numba.njit
    def clip(x, out):
        for i in range(x.size):
            out[i] = min(x[i], limit)

    return clip


clip = xck.XLACustomKernel("tutorial_clip")
clip.def_numba_kernel(clip_generator)

X = np.arange(8, dtype=np.float32)
XB = np.arange(24, dtype=np.float32).reshape(3, 8)
EXPECTED = {
    "axpy": 3 * X,
    "axpy_vmap": 3 * XB,
    "clip": np.minimum(X, 5),
}


def export_all(folder: str, key: bytes) -> None:
    # --- 1. Export: ffi_core.export is jax.export.export with our targets allowed
    # Plain jax.export.export refuses a kernel's FFI target, as it refuses any
    # custom call it does not know to be stable; its message lists the calls.
    try:
        jax.export.export(jax.jit(lambda x: axpy_op(x, x)))(X)
    except ValueError as exc:
        first = str(exc).split(". ")[0]
        assert first == (
            "Cannot serialize code with custom calls whose targets have no compatibility guarantees"
        )
        print(f"jax.export.export: ValueError: {first}; ffi_core.export exports it")
    else:
        raise AssertionError("jax.export.export exported a numba kernel's custom call")
    cases = {
        "axpy": (lambda x: axpy_op(x, x), X),
        "axpy_vmap": (jax.vmap(lambda x: axpy_op(x, x)), XB),
        "clip": (lambda x: clip(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), limit=5.0), X),
    }
    for name, (fn, arg) in cases.items():
        exported = ffi_core.export(fn)(arg)
        (target,) = custom_call_targets(exported)  # one numba target each
        assert target.startswith("numba_cpu.")
        # --- 2. Serialize: JAX's bytes and how to make each target again
        with open(os.path.join(folder, f"{name}.bin"), "wb") as f:
            f.write(ffi_core.serialize(exported, key=key))  # signed with the key
    print("exported: " + ", ".join(cases))


def call_all(folder: str, key: bytes) -> None:
    # --- 3. In a new process: deserialize verifies the signature, registers
    # the kernels, then call
    for name, want in EXPECTED.items():
        with open(os.path.join(folder, f"{name}.bin"), "rb") as f:
            restored = ffi_core.deserialize(f.read(), key=key)
        arg = XB if name.endswith("vmap") else X
        np.testing.assert_array_equal(restored.call(arg), want)
        np.testing.assert_array_equal(jax.jit(restored.call)(arg), want)
    print("called in a new process: " + ", ".join(EXPECTED))


# Every check_kernel row but these runs on the two ops below.
SKIP = {
    # check_kernel's own export check deserializes in a fresh process that
    # imports the modules defining the kernels; this file runs as __main__,
    # which no other process can import (main() below starts a copy of the
    # file instead).
    "export": "the tutorial runs as __main__, which a fresh process cannot import",
}


def check_ops() -> None:
    # --- 4. The ops themselves, checked under every transform (Tutorial 8):
    # eager vs jit vs a reference, vmap, compile counts, threads, bad inputs.
    # They have no JVP rule, which is reported, not failed. check_kernel
    # raises an AssertionError naming every failed row.
    reports = [
        check_kernel(axpy_op, X, X, reference=lambda x, y: 2 * x + y, skip=SKIP),
        check_kernel(
            clip,
            X,
            kwargs={"outs": jax.ShapeDtypeStruct(X.shape, X.dtype), "limit": 5.0},
            reference=lambda x: np.minimum(x, 5.0),
            skip=SKIP,
        ),
    ]
    for report in reports:
        assert report.ok and {"results", "vmap", "bad_inputs"} <= {
            row.family for row in report.passed
        }
        print(report.summary())


def main() -> None:
    # The key is a secret the writer and the reader share; here it reaches the
    # new process on its standard input (a real program reads it from its
    # secret store). 32 random bytes.
    key = secrets.token_bytes(32)
    with tempfile.TemporaryDirectory() as folder:
        export_all(folder, key)
        out = subprocess.run(
            [sys.executable, __file__, "call", folder],
            input=key.hex(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        print(out.stdout.strip())
    check_ops()
    print("all steps passed")


if __name__ == "__main__":
    if sys.argv[1:2] == ["call"]:
        call_all(sys.argv[2], bytes.fromhex(sys.stdin.read()))
    else:
        main()
