"""Threads: OpenMP workers must not spin between calls (importing the package
selects a passive wait policy unless the user chose one), and a parallel
kernel, or the batch loop of a vmapped call, wakes threads only for enough
work (``parallel_min_elements``); below it the call runs serially on the
calling thread. Kernels here write the id of the Numba thread that ran each
element, so the tests see which threads ran, not how fast.
"""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from numba_cpu_ffi import numba_kernel, parallel_min_elements

needs_threads = pytest.mark.skipif(
    numba.config.NUMBA_NUM_THREADS < 2, reason="needs at least two Numba threads"
)


@pytest.mark.parametrize(("given", "expected"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_openmp_wait_policy(given, expected):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    code = "import os, numba_cpu_ffi; print(os.environ['OMP_WAIT_POLICY'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected


@numba.njit(parallel=True)
def _thread_ids(x, out):
    for i in numba.prange(x.size):
        out[i] = numba.get_thread_id()


@numba.njit
def _row_thread(x, out):
    out[0] = numba.get_thread_id()


def _ids(n: int) -> set[int]:
    x = jnp.zeros(n, jnp.float32)
    op = numba_kernel(_thread_ids, jax.ShapeDtypeStruct((n,), jnp.int32))
    return set(np.unique(np.asarray(jax.jit(op)(x))).tolist())


def test_threshold_follows_the_thread_count():
    if numba.config.NUMBA_NUM_THREADS < 2:
        assert parallel_min_elements() == 2**62  # never threads
    else:
        assert 100_000 < parallel_min_elements() < 1_000_000


@needs_threads
def test_a_small_parallel_call_stays_on_one_thread():
    assert _ids(1000) == {0}
    assert _ids(parallel_min_elements() - 1) == {0}


@needs_threads
def test_a_large_parallel_call_uses_threads():
    assert len(_ids(parallel_min_elements())) > 1


@needs_threads
@pytest.mark.parametrize(
    ("rows", "cols", "threaded"),
    [(64, 1000, False), (4096, 16, False), (64, 8192, True)],
)
def test_the_batch_loop_is_threaded_by_total_work(rows, cols, threaded):
    x = jnp.zeros((rows, cols), jnp.float32)
    op = numba_kernel(_row_thread, jax.ShapeDtypeStruct((1,), jnp.int32))
    ids = set(np.unique(np.asarray(jax.jit(jax.vmap(op))(x))).tolist())
    assert (len(ids) > 1) is threaded, ids
    if not threaded:
        assert ids == {0}


@needs_threads
def test_a_vmapped_parallel_kernel_runs_serial_rows():
    # Rows of a parallel kernel: threads over the batch, never inside a row.
    rows, cols = 64, 8192
    x = jnp.zeros((rows, cols), jnp.float32)
    op = numba_kernel(_thread_ids, jax.ShapeDtypeStruct((cols,), jnp.int32))
    out = np.asarray(jax.jit(jax.vmap(op))(x))
    assert all(len(set(row.tolist())) == 1 for row in out)
    assert len(np.unique(out)) > 1
