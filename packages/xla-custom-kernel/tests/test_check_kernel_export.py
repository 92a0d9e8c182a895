"""check_kernel's export, aliases and sharding checks, on correct and broken operations."""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numba
import pytest
from numba_cpu_ffi import numba_kernel
from xla_custom_kernel import XLACustomKernel
from xla_custom_kernel.testing import CheckResult, Status, check_kernel

X = jnp.array([1.0, 2.0, 3.0, 4.0], jnp.float32)
HERE = pathlib.Path(__file__).parent


@pytest.fixture
def ops(monkeypatch):
    # Importable by name here and, through sys.path, in the fresh process.
    monkeypatch.syspath_prepend(str(HERE))
    import check_kernel_ops

    return check_kernel_ops


def test_export_in_a_fresh_process(ops):
    report = check_kernel(ops.double, X, checks=["export"], export_imports=["check_kernel_ops"])
    assert report.results == (
        CheckResult(
            "export: in a fresh process",
            Status.PASSED,
            "deserialized and called after importing check_kernel_ops",
        ),
    )


def test_op_whose_target_name_changes_between_processes(ops):
    report = check_kernel(
        ops.salted_double, X, checks=["export"], export_imports=["check_kernel_ops"], raises=False
    )
    (row,) = report.failed
    assert row.check == "export: in a fresh process"
    assert row.detail.startswith("the fresh process (which imported check_kernel_ops) failed: "), (
        row.detail
    )
    assert (
        "MissingKernelError: the exported function calls FFI target 'numba_cpu._salted_double_"
        in row.detail
    )
    assert "its code or the values it captures differ from the exported kernel's" in row.detail


def test_export_without_an_importable_module_is_skipped():
    report = check_kernel(lambda x: 2 * x, X, checks=["export"], export_imports=["__main__"])
    assert report.results == (
        CheckResult(
            "export: in a fresh process",
            Status.SKIPPED,
            "a fresh process cannot import __main__; give `export_imports`, the modules that "
            "define the op's kernels",
        ),
    )


def test_bridge_op_without_export_imports_is_skipped(ops):
    # numba_kernel's wrapper lives in numba_cpu_ffi's private module.
    report = check_kernel(ops.double, X, checks=["export"])
    assert report.results == (
        CheckResult(
            "export: in a fresh process",
            Status.SKIPPED,
            "give `export_imports`, the modules that define the op's kernels (the op's own "
            "module, numba_cpu_ffi._kernel, is not one)",
        ),
    )


@numba.njit
def _increment(x, out):
    for i in range(x.size):
        out[i] = x[i] + 1


@numba.njit
def _add_and_clobber(x, y, out):
    for i in range(x.size):
        out[i] = x[i] + y[i]
    y[0] = -1  # writes into an input it does not own


def test_aliased_output_reuses_the_donated_buffer():
    op = numba_kernel(
        _increment, jax.ShapeDtypeStruct(X.shape, X.dtype), input_output_aliases={0: 0}
    )
    report = check_kernel(op, X, checks=["aliases"])
    assert report.results == (
        CheckResult("aliases: inputs untouched", Status.PASSED),
        CheckResult(
            "aliases: output 0 reuses donated input 0",
            Status.PASSED,
            "the same buffer, other inputs untouched",
        ),
    )


def test_op_without_aliases_skips_donation():
    op = numba_kernel(_increment, jax.ShapeDtypeStruct(X.shape, X.dtype))
    report = check_kernel(op, X, checks=["aliases"])
    assert report.results[1] == CheckResult(
        "aliases: donation", Status.SKIPPED, "the op declares no input_output_aliases"
    )


def test_kernel_that_writes_into_an_input():
    op = numba_kernel(_add_and_clobber, jax.ShapeDtypeStruct(X.shape, X.dtype))
    report = check_kernel(op, X, X + 1, checks=["aliases"], raises=False)
    assert report.failed == (
        CheckResult(
            "aliases: inputs untouched",
            Status.FAILED,
            "an eager call changed its inputs: input 1 changed at index (0,): 2.0 -> -1.0",
        ),
    )


def _struct(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def test_op_with_a_sharding_rule(name):
    op = XLACustomKernel(name)
    op.def_sharding_rule("elementwise")
    op.def_numba_kernel(lambda outs: _increment)
    # Through a call function: on a shard, `outs` follows the shard's shape.
    op.def_call(lambda x: op(x, outs=_struct(x)))
    report = check_kernel(op, X, checks=["sharding"])
    assert report.results == (
        CheckResult(
            "sharding: sharded jit",
            Status.PASSED,
            "'e0' split over 4 devices; device 0 computed 1 of 4",
        ),
        CheckResult("sharding: shard_map", Status.PASSED, "'e0' split over 4 devices"),
    )


def test_op_whose_sharding_rule_is_wrong(name):
    # A running sum is not elementwise: each device sums its own shard only.
    op = XLACustomKernel(name)
    op.def_sharding_rule("elementwise")
    op.def_jax_kernel(lambda outs: jnp.cumsum)
    op.def_call(lambda x: op(x, outs=_struct(x)))
    report = check_kernel(op, X, checks=["sharding"], raises=False)
    assert [(r.check, r.detail.split(":")[0]) for r in report.failed] == [
        ("sharding: sharded jit", "output 0 at index (1,)"),
        ("sharding: shard_map", "output 0 at index (1,)"),
    ]


def test_op_without_a_sharding_rule(name):
    op = XLACustomKernel(name)
    op.def_jax_kernel(lambda outs: jnp.cumsum)
    report = check_kernel(op, X, kwargs={"outs": _struct(X)}, checks=["sharding"])
    assert report.results == (
        CheckResult("sharding", Status.SKIPPED, "the op declares no sharding rule"),
    )
