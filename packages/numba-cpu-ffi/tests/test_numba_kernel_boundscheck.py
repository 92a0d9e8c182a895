"""Bounds checks on request: a kernel that indexes past its buffers raises an
exception naming it instead of corrupting memory; check_kernel always checks
bounds, so the mistake is a failed row and the test runner survives."""

import os
import re
import subprocess
import sys
import textwrap

import ffi_core
import ffi_core.bridge
import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from ffi_core.bridge import bounds_checked, bounds_checking
from kernel_check import check_kernel
from numba_cpu_ffi import numba_kernel

S = jax.ShapeDtypeStruct


@numba.njit
def one_row_add(x, y, out):
    # Written for one row: under expand_dims it sees (batch, n) arrays and its
    # flat index runs past the first axis.
    for i in range(out.size):
        out[i] = x[i] + y[i]


_OOB = "numba kernel 'one_row_add' raised IndexError: index is out of bounds"


@pytest.mark.parametrize("method", ["expand_dims", "broadcast_all"])
def test_the_option_turns_an_overrun_into_an_error(method):
    f = numba_kernel(one_row_add, S((100,), jnp.float32), vmap_method=method, boundscheck=True)
    rows = jnp.ones((8, 100), jnp.float32)
    with pytest.raises(Exception, match=re.escape(_OOB)):
        jax.block_until_ready(jax.jit(jax.vmap(f))(rows, rows))


def _targets():
    return {
        n for n, _ in ffi_core.bridge.registered_targets() if n.startswith("numba_cpu.one_row_add")
    }


def test_a_bounds_checked_kernel_gives_the_same_results_under_another_target():
    before = _targets()
    x = jnp.arange(16, dtype=jnp.float32)
    checked = numba_kernel(one_row_add, S(x.shape, x.dtype), boundscheck=True)
    plain = numba_kernel(one_row_add, S(x.shape, x.dtype), boundscheck=False)
    np.testing.assert_array_equal(jax.jit(checked)(x, x), 2 * x)
    np.testing.assert_array_equal(jax.jit(plain)(x, x), 2 * x)
    assert len(_targets() - before) == 2


@pytest.mark.parametrize("method", ["expand_dims", "broadcast_all"])
def test_check_kernel_reports_the_overrun_as_a_failed_row(method):
    x = jnp.ones(100, jnp.float32)
    op = numba_kernel(one_row_add, S(x.shape, x.dtype), vmap_method=method)
    report = check_kernel(op, x, x, vmap_methods=[None, method], checks=["vmap"], raises=False)
    failed = {row.check: row.detail for row in report.results if row.status.name == "FAILED"}
    assert failed, str(report)
    assert all(_OOB in detail for detail in failed.values()), str(report)
    assert f"vmap: vmap_method={method!r}, batch axis 0" in failed
    # vmap_method=None loops over the rows: every row in bounds.
    assert "vmap: vmap_method=None, batch axis 0" not in failed


def test_check_kernel_binds_inside_bounds_checking_only():
    assert not bounds_checked()
    with bounds_checking():
        assert bounds_checked()
        assert not bounds_checked(False)
        with bounds_checking(False):
            assert not bounds_checked()
    assert bounds_checked(True)


def test_the_option_is_a_bool():
    with pytest.raises(
        TypeError, match=re.escape("`boundscheck` must be a bool or None, got <class 'int'>")
    ):
        numba_kernel(one_row_add, S((4,), jnp.float32), boundscheck=1)


_SWITCHED = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numba
    from numba_cpu_ffi import numba_kernel

    @numba.njit
    def one_row_add(x, y, out):
        for i in range(out.size):
            out[i] = x[i] + y[i]

    f = numba_kernel(one_row_add, jax.ShapeDtypeStruct((100,), jnp.float32),
                     vmap_method="expand_dims")
    rows = jnp.ones((8, 100), jnp.float32)
    try:
        jax.block_until_ready(jax.jit(jax.vmap(f))(rows, rows))
    except Exception as error:
        print(type(error).__name__, error)
    """
)


def _child(value: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _SWITCHED],
        env=dict(os.environ, FFI_CORE_BOUNDSCHECK=value),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_process_switch_checks_every_kernel():
    result = _child("1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert _OOB in result.stdout, result.stdout + result.stderr[-3000:]


def test_the_process_switch_refuses_other_values():
    result = _child("yes")
    assert result.returncode == 0, result.stderr[-3000:]
    assert (
        "ValueError $FFI_CORE_BOUNDSCHECK must be '0' or '1' (or unset), got 'yes'" in result.stdout
    ), result.stdout
