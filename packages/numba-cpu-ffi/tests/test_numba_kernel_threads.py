"""Threads: the package leaves the process's environment alone (OpenMP's wait
policy is set by ``configure_threads`` only when asked), and a parallel
kernel, or the batch loop of a vmapped call, wakes threads only for enough
work (``parallel_min_elements``); below it the call runs serially on the
calling thread. Kernels here write the id of the Numba thread that ran each
element, so the tests see which threads ran, not how fast.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from numba_cpu_ffi import numba_kernel, parallel_min_elements

needs_threads = pytest.mark.skipif(
    numba.config.NUMBA_NUM_THREADS < 2, reason="needs at least two Numba threads"
)


def _python(code: str, **env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(code)],
        env=base | env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout.strip()


def test_import_and_calls_leave_the_environment_alone():
    code = """
        import importlib, os, pkgutil
        import jax, jax.numpy as jnp, numba  # JAX sets variables of its own
        before = dict(os.environ)
        import numba_cpu_ffi
        for module in pkgutil.walk_packages(numba_cpu_ffi.__path__, "numba_cpu_ffi."):
            importlib.import_module(module.name)
        assert dict(os.environ) == before, "import"

        @numba.njit(parallel=True)
        def double(x, out):
            for i in numba.prange(x.size):
                out[i] = 2 * x[i]

        x = jnp.ones(numba_cpu_ffi.parallel_min_elements(), jnp.float32)
        op = numba_cpu_ffi.numba_kernel(double, jax.ShapeDtypeStruct(x.shape, x.dtype))
        jax.block_until_ready(jax.jit(op)(x))
        jax.block_until_ready(jax.vmap(op)(x[None]))
        assert dict(os.environ) == before, "calls"
        print("ok")
    """
    assert _python(code) == "ok"


def test_configure_threads_sets_the_policy_asked_unless_chosen():
    # One process (Numba's pool never starts in it): each case with the
    # variable as given, then what configure_threads returns and leaves set.
    code = """
        import os, numba_cpu_ffi
        cases = [(None, None), (None, "ACTIVE"), (None, "active"), (None, "passive"),
                 ("ACTIVE", None), ("PASSIVE", "ACTIVE")]
        for given, asked in cases:
            os.environ.pop("OMP_WAIT_POLICY", None)
            if given is not None:
                os.environ["OMP_WAIT_POLICY"] = given
            args = () if asked is None else (asked,)
            print(numba_cpu_ffi.configure_threads(*args), os.environ["OMP_WAIT_POLICY"])
    """
    assert _python(code).splitlines() == [
        "PASSIVE PASSIVE",
        "ACTIVE ACTIVE",
        "ACTIVE ACTIVE",
        "PASSIVE PASSIVE",
        "ACTIVE ACTIVE",
        "PASSIVE PASSIVE",
    ]


@pytest.mark.parametrize(
    ("policy", "error", "shown"),
    [
        ("SPIN", ValueError, "'SPIN'"),
        ("", ValueError, "''"),
        (None, TypeError, "None"),
        (1, TypeError, "1"),
    ],
)
def test_configure_threads_refuses_an_unknown_policy(monkeypatch, policy, error, shown):
    import numba_cpu_ffi

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with pytest.raises(error) as raised:
        numba_cpu_ffi.configure_threads(policy)
    assert str(raised.value) == f"`policy` must be 'PASSIVE' or 'ACTIVE', got {shown}"
    assert "OMP_WAIT_POLICY" not in os.environ


def test_configure_threads_after_the_pool_started():
    code = """
        import os, numba, numpy as np, numba_cpu_ffi

        @numba.njit(parallel=True)
        def total(x):
            s = 0.0
            for i in numba.prange(x.size):
                s += x[i]
            return s

        total(np.ones(10))
        try:
            numba_cpu_ffi.configure_threads("active")
        except RuntimeError as error:
            print(error)
        print("OMP_WAIT_POLICY" in os.environ)
    """
    assert _python(code).splitlines() == [
        "configure_threads() must run before Numba's thread pool starts (the first parallel "
        "kernel, or the first numba_kernel handler loaded from the disk cache); call it right "
        "after importing numba_cpu_ffi, or set OMP_WAIT_POLICY=ACTIVE in the environment "
        "before starting Python",
        "False",
    ]


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


@numba.njit
def _refuses_a_negative_row(x, out):
    if x[0] < 0:
        raise ValueError("a negative row")
    for i in range(x.size):
        out[i] = x[i]


@needs_threads
def test_an_error_in_a_row_run_across_threads_names_the_kernel():
    # 64 rows of 8192: enough work for the call shape's loop of threads.
    rows, cols = 64, 8192
    op = jax.jit(
        jax.vmap(numba_kernel(_refuses_a_negative_row, jax.ShapeDtypeStruct((cols,), jnp.float32)))
    )
    ok = jnp.ones((rows, cols), jnp.float32)
    np.testing.assert_array_equal(op(ok), ok)
    with pytest.raises(Exception, match=r"_refuses_a_negative_row.*a negative row"):
        jax.block_until_ready(op(ok.at[37, 0].set(-1.0)))
