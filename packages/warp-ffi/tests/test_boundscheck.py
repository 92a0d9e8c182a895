"""Bounds checks on request: a Warp kernel that indexes past its buffers is
an error naming it instead of a write past a buffer; with the option on,
check_kernel reports the mistake as a failed row and the test runner
survives. check_kernel's own bounds_checking() block does not turn Warp's
checks on (each checked call forks a child). The checks are the CPU's: every
test here runs there (conftest; the child process by JAX_PLATFORMS), and
test_gpu.py holds what a GPU call with the option does."""

import os
import re
import subprocess
import sys
import textwrap

import ffi_core
import ffi_core.bridge
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import warp as wp
from ffi_core.bridge import bounds_checked, bounds_checking
from kernel_check import check_kernel
from warp_ffi import _checked, warp_kernel

S = jax.ShapeDtypeStruct


@wp.kernel
def one_row_add(
    x: wp.array2d(dtype=float), y: wp.array2d(dtype=float), out: wp.array2d(dtype=float)
):
    # Declared for the (batch, n) arrays of expand_dims, but indexed as if
    # the batch were one flat row: past row 0's length from the second row on.
    b, i = wp.tid()
    k = b * out.shape[1] + i
    out[0, k] = x[0, k] + y[0, k]


@wp.kernel
def shifted_add(x: wp.array(dtype=float), y: wp.array(dtype=float), out: wp.array(dtype=float)):
    # An off-by-one read: the last thread reads past the inputs.
    i = wp.tid()
    out[i] = x[i + 1] + y[i]


_OOB = "warp kernel 'one_row_add' indexed an array out of bounds: Assertion failed: '"


@pytest.mark.parametrize("method", ["expand_dims", "broadcast_all"])
def test_the_option_turns_an_overrun_into_an_error(method):
    f = warp_kernel(one_row_add, S((100,), jnp.float32), vmap_method=method, boundscheck=True)
    rows = jnp.ones((8, 100), jnp.float32)
    with pytest.raises(Exception, match=re.escape(_OOB)):
        jax.block_until_ready(jax.jit(jax.vmap(f))(rows, rows))


def _targets():
    return {
        n for n, _ in ffi_core.bridge.registered_targets() if n.startswith("warp_cpu.one_row_add")
    }


def test_a_bounds_checked_kernel_gives_the_same_results_under_another_target():
    x = jnp.arange(16, dtype=jnp.float32).reshape(1, 16)  # one row: in bounds
    kw = {"vmap_method": "expand_dims"}
    checked = jax.vmap(warp_kernel(one_row_add, S((16,), x.dtype), boundscheck=True, **kw))
    plain = jax.vmap(warp_kernel(one_row_add, S((16,), x.dtype), boundscheck=False, **kw))
    np.testing.assert_array_equal(jax.jit(checked)(x, x), 2 * x)
    after_checked = _targets()
    np.testing.assert_array_equal(jax.jit(plain)(x, x), 2 * x)
    # Two targets of one signature: the checked one and the plain one.
    assert len(after_checked) >= 1 and len(_targets()) >= 2
    # The user's kernel and module keep their options.
    assert one_row_add.module.options.get("mode") is None


def test_the_flag_travels_in_the_export_recipe():
    x = jnp.ones((1, 8), jnp.float32)
    f = warp_kernel(one_row_add, S((8,), x.dtype), vmap_method="expand_dims", boundscheck=True)
    key = b"warp-ffi tests: a 32-byte key...."
    # For the CPU: export's default is JAX's default backend, whatever the default device.
    exported = ffi_core.export(jax.jit(jax.vmap(f)), platforms=["cpu"])(x, x)
    blob = ffi_core.serialize(exported, key=key)
    assert b'"boundscheck": true' in blob or b'"boundscheck":true' in blob
    np.testing.assert_array_equal(ffi_core.deserialize(blob, key=key).call(x, x), 2 * x)


def test_check_kernel_reports_the_overrun_as_a_failed_row():
    x = jnp.ones(100, jnp.float32)
    op = warp_kernel(shifted_add, S(x.shape, x.dtype), boundscheck=True)
    report = check_kernel(op, x, x, checks=["results"], raises=False)
    failed = {row.check: row.detail for row in report.results if row.status.name == "FAILED"}
    assert failed, str(report)
    oob = "warp kernel 'shifted_add' indexed an array out of bounds: Assertion failed: '"
    assert all(oob in detail for detail in failed.values()), str(report)


def test_the_option_is_a_bool():
    with pytest.raises(
        TypeError, match=re.escape("`boundscheck` must be a bool or None, got <class 'int'>")
    ):
        warp_kernel(one_row_add, S((1, 4), jnp.float32), boundscheck=1)


_SWITCHED = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, warp as wp
    from warp_ffi import _checked, warp_kernel

    @wp.kernel
    def one_row_add(x: wp.array2d(dtype=float), y: wp.array2d(dtype=float),
                    out: wp.array2d(dtype=float)):
        b, i = wp.tid()
        k = b * out.shape[1] + i
        out[0, k] = x[0, k] + y[0, k]

    f = warp_kernel(one_row_add, jax.ShapeDtypeStruct((100,), jnp.float32),
                    vmap_method="expand_dims")
    rows = jnp.ones((8, 100), jnp.float32)
    try:
        jax.block_until_ready(jax.jit(jax.vmap(f))(rows, rows))
        print("no error")
    except Exception as error:
        print(type(error).__name__, error)
    """
)


# faulthandler on, writing to a copy of stderr, as pytest turns it on.
_FAULTHANDLER = "import faulthandler, os; faulthandler.enable(os.fdopen(os.dup(2), 'w'))\n"


def test_the_process_switch_checks_every_kernel(tmp_path):
    # Warp reads a kernel's source from its file. With faulthandler on, the
    # checked child's stop is reported once, as the error, not also as a
    # "Fatal Python error" dump of the child.
    script = tmp_path / "switched.py"
    script.write_text(_FAULTHANDLER + _SWITCHED)
    result = subprocess.run(
        [sys.executable, str(script)],
        env=dict(os.environ, FFI_CORE_BOUNDSCHECK="1", JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert _OOB in result.stdout, result.stdout + result.stderr[-3000:]
    assert "Fatal Python error" not in result.stderr, result.stderr[-3000:]


@wp.kernel
def plain_add(x: wp.array(dtype=float), y: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = x[i] + y[i]


def test_by_default_a_kernel_is_not_bounds_checked():
    x = jnp.arange(8, dtype=jnp.float32)
    f = warp_kernel(plain_add, S(x.shape, x.dtype))
    assert not bounds_checked()
    np.testing.assert_array_equal(jax.jit(f)(x, x), 2 * x)
    # No debug-mode copy was made: the call ran the user's kernel.
    assert plain_add not in _checked._copies
    # Nor inside check_kernel's block: Warp's checks run on request only.
    with bounds_checking():
        np.testing.assert_array_equal(jax.jit(lambda a, b: f(a, b))(x + 1, x), 2 * x + 1)
    assert plain_add not in _checked._copies
    g = warp_kernel(plain_add, S(x.shape, x.dtype), boundscheck=True)
    np.testing.assert_array_equal(jax.jit(g)(x, x), 2 * x)
    assert plain_add in _checked._copies
