"""The library's own tests: check_kernel on every transform, a sharded batch,
a benchmark, the kernel-bench command and an export round trip."""

from __future__ import annotations

import functools
import pathlib
import re
import secrets
import subprocess
import sys

import ffi_core
import jax
import numpy as np
import pytest
from downstream_csr import csr_matvec, random_csr
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from xla_custom_kernel.testing import check_kernel

M, N = 12, 9
A = random_csr(M, N, 0.3, seed=0)
BIG = random_csr(20, 15, 0.3, seed=1)


def _dense(data, indices, indptr, shape):
    dense = np.zeros(shape, np.float32)
    rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
    dense[rows, indices] = data
    return dense


def _reference(data, indices, indptr, v, *, shape, transpose=False):
    dense = _dense(np.asarray(data), np.asarray(indices), np.asarray(indptr), shape)
    return (dense.T if transpose else dense) @ np.asarray(v)


@pytest.mark.parametrize("transpose", [False, True])
def test_check_kernel(transpose):
    shape, big_shape = (M, N), (20, 15)
    v = np.linspace(-1, 1, M if transpose else N, dtype=np.float32)
    big_v = np.linspace(-1, 1, 20 if transpose else 15, dtype=np.float32)
    report = check_kernel(
        csr_matvec,
        *A,
        v,
        kwargs={"shape": shape, "transpose": transpose},
        reference=functools.partial(_reference, shape=shape, transpose=transpose),
        differentiable=("v",),
        other_args=(*BIG, big_v),
        other_kwargs={"shape": big_shape, "transpose": transpose},
    )
    ran = {row.family for row in report.passed}
    assert {"results", "backends", "vmap", "autodiff", "compile", "export", "sharding"} <= ran


def test_grad_in_the_values_is_refused():
    v = np.ones(N, np.float32)

    def loss(data):
        return csr_matvec.call(data, A[1], A[2], v, shape=(M, N)).sum()

    with pytest.raises(NotImplementedError, match=re.escape("of kernel 'csr_matvec' is not")):
        jax.grad(loss)(A[0])


def test_a_sharded_batch_of_vectors_is_split():
    mesh = Mesh(np.array(jax.devices()), ("d",))
    vs = np.random.default_rng(3).standard_normal((8, N)).astype(np.float32)
    batch = jax.device_put(vs, NamedSharding(mesh, P("d")))
    f = jax.jit(jax.vmap(lambda v: csr_matvec.call(*A, v, shape=(M, N))))
    out = f(batch)
    assert out.sharding.spec == P("d")
    assert "all-gather" not in f.lower(batch).compile().as_text()
    np.testing.assert_allclose(out, vs @ _dense(*A, (M, N)).T, rtol=1e-5, atol=1e-5)


def test_benchmark():
    result = csr_matvec.benchmark(platform="cpu", n_warmup=1, n_runs=3)
    assert {r.backend for r in result.records} == {"numba", "jax"}
    assert all(r.success for r in result.records), [r.error for r in result.records]


def test_the_command_checks_it_by_module_and_name():
    script = pathlib.Path(sys.executable).parent / "kernel-bench"
    done = subprocess.run(
        [str(script), "check", "downstream_csr:csr_matvec", "--checks", "results", "backends"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "check_kernel(csr_matvec)" in done.stdout


_CALL = """
import sys
import downstream_csr  # the module that makes the kernel: deserialize finds it there
import ffi_core
import numpy as np

blob = open(sys.argv[1], "rb").read()
exported = ffi_core.deserialize(blob, key=bytes.fromhex(sys.stdin.read()))
args = [np.load(sys.argv[2])[k] for k in ("data", "indices", "indptr", "v")]
np.save(sys.argv[3], np.asarray(exported.call(*args)))
"""


def test_export_round_trip(tmp_path):
    v = np.linspace(-1, 1, N, dtype=np.float32)
    f = jax.jit(functools.partial(csr_matvec.call, shape=(M, N)))
    key = secrets.token_bytes(32)
    blob = tmp_path / "matvec.bin"
    blob.write_bytes(ffi_core.serialize(ffi_core.export(f)(*A, v), key=key))
    np.savez(tmp_path / "args.npz", data=A[0], indices=A[1], indptr=A[2], v=v)
    done = subprocess.run(
        [sys.executable, "-c", _CALL, str(blob), str(tmp_path / "args.npz"), str(tmp_path / "y")],
        input=key.hex(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), f(*A, v), rtol=1e-6)
