"""check_kernel on broken operations, one per check, and on correct ones.

Each broken operation has one deliberate fault; check_kernel must fail the row
of the check that sees it, naming the first wrong element. Correct operations
must pass, also when checked again and again.
"""

from __future__ import annotations

import re
import time

import ffi_core
import ffi_core.bridge
import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from numba_cpu_ffi import numba_kernel
from xla_custom_kernel import XLACustomKernel
from xla_custom_kernel.testing import CheckResult, Status, check_kernel


def _struct(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def _row(report, check):
    (row,) = [r for r in report.results if r.check == check]
    return row


def _failed_only(report, *checks):
    assert {r.check for r in report.failed} == set(checks), str(report)


X = jnp.array([1.0, 2.0, 3.0, 4.0], jnp.float32)


# ---------------------------------------------------------------- correct ops


@numba.njit
def _scale_numba(x, y, out):
    for i in range(x.size):
        out[i] = 3.0 * x[i] + y[i]


def _linear_op(name):
    # 3 x + y, two backends, JVP and transpose rules: every check applies.
    op = XLACustomKernel(name)
    op.def_numba_kernel(lambda outs: _scale_numba)
    op.def_jax_kernel(lambda outs: lambda x, y: 3.0 * x + y)
    op.def_jvp_rule2(
        lambda t, x, y, outs: op(t, jnp.zeros_like(y), outs=outs),
        lambda t, x, y, outs: op(jnp.zeros_like(x), t, outs=outs),
    )

    @op.def_transpose_rule
    def _transpose(cts, x, y, *, outs):
        (ct,) = cts
        return [
            3.0 * ct if jax.interpreters.ad.is_undefined_primal(x) else None,
            ct if jax.interpreters.ad.is_undefined_primal(y) else None,
        ]

    @op.def_call
    def _call(x, y):
        # The inputs are checked before the kernel sees them (a Numba kernel
        # does not check bounds). Outputs have the inputs' dtype, so float64
        # inputs give float64 results and the JVP is checked in float64.
        for i, (arg, a) in enumerate((("x", x), ("y", y))):
            if a.dtype not in (jnp.float32, jnp.float64):
                raise TypeError(f"input {i} (`{arg}`) must be float32 or float64, got {a.dtype}")
        if x.ndim != 1 or x.shape != y.shape:
            raise ValueError(
                f"input 0 (`x`) must be a vector of the shape of `y`, got {x.shape} and {y.shape}"
            )
        return op(x, y, outs=_struct(x))

    return op


def test_correct_op_passes(name):
    op = _linear_op(name)
    y = jnp.linspace(-1, 1, 4, dtype=jnp.float32)
    report = check_kernel(
        op,
        X,
        y,
        reference=lambda x, y: 3 * x + y,
        other_args=(jnp.ones(6, jnp.float32), jnp.ones(6, jnp.float32)),
        skip=["export"],
    )
    assert report.ok
    families = {r.family for r in report.passed}
    assert families >= {
        "results",
        "backends",
        "vmap",
        "autodiff",
        "compile",
        "threads",
        "bad_inputs",
    }
    assert _row(report, "autodiff: JVP vs finite differences").detail == "in float64"
    assert _row(report, "autodiff: second order (check_grads)").status is Status.PASSED
    assert _row(report, "bad_inputs: dtype") == CheckResult(
        "bad_inputs: dtype",
        Status.PASSED,
        "input 0 as int32: TypeError: input 0 (`x`) must be float32 or float64, got int32",
    )
    assert _row(report, "vmap: backend 'jax', batch axis 0").status is Status.PASSED


def test_no_false_alarm_over_20_repetitions(name):
    # The checks whose outcome could vary from run to run: threads racing,
    # results of repeated calls, batches. Inputs are fixed (and so are the
    # random tangents of the autodiff checks), so a flaky check shows here.
    op = _linear_op(name)
    y = jnp.linspace(-1, 1, 4, dtype=jnp.float32)
    for _ in range(20):
        check_kernel(
            op,
            X,
            y,
            checks=["results", "backends", "vmap: batch axis 0", "threads"],
        )


def test_op_without_rules_is_reported_not_failed(name):
    op = XLACustomKernel(name)
    op.def_jax_kernel(lambda outs: lambda x: x * 2)
    report = check_kernel(op, X, kwargs={"outs": _struct(X)}, raises=False)
    row = _row(report, "autodiff")
    assert row.status is Status.SKIPPED
    assert row.detail.startswith(f"the op has no JVP rule (NotImplementedError: kernel {name!r}")


def test_jvp_without_transpose_skips_reverse_mode(name):
    op = XLACustomKernel(name)
    op.def_jax_kernel(lambda outs: lambda x: jnp.sin(x))
    op.def_jvp_rule2(lambda t, x, outs: op(x, outs=outs) * 0 + jnp.cos(x) * t)
    report = check_kernel(op, X, kwargs={"outs": _struct(X)}, raises=False, checks=["autodiff"])
    assert _row(report, "autodiff: JVP vs finite differences").status is Status.PASSED


# ---------------------------------------------------------------- broken ops


def test_jvp_rule_off_by_a_factor(name):
    op = XLACustomKernel(name)
    op.def_jax_kernel(lambda outs: lambda x: x * x)
    op.def_jvp_rule2(lambda t, x, outs: 4 * x * t)  # the derivative is 2 x
    with pytest.raises(AssertionError) as info:
        check_kernel(op, X, kwargs={"outs": _struct(X)}, checks=["autodiff"])
    message = str(info.value)
    assert (
        "autodiff: JVP vs finite differences  failed  input 0: output 0 at index (0,):" in message
    )
    assert re.search(r"finite differences give [-\d.e]+, the JVP rule gives [-\d.e]+", message)


def test_transpose_rule_that_is_not_the_adjoint(name):
    op = XLACustomKernel(name)
    op.def_jax_kernel(lambda outs: lambda x: jnp.cumsum(x))
    op.def_jvp_rule2(lambda t, x, outs: op(t, outs=outs))
    # The adjoint of cumsum sums from the end; this sums from the start.
    op.def_transpose_rule(lambda cts, x, outs: [jnp.cumsum(cts[0])])
    report = check_kernel(op, X, kwargs={"outs": _struct(X)}, raises=False, checks=["autodiff"])
    _failed_only(
        report, "autodiff: transpose vs JVP (dot-product test)", "autodiff: grad of a scalar loss"
    )
    detail = _row(report, "autodiff: transpose vs JVP (dot-product test)").detail
    assert re.fullmatch(
        r"input 0: <J v, w> = \S+ but <v, J\^T w> = \S+; at index \(0,\) of its cotangent "
        r"the JVP gives \S+, the transpose rule \S+",
        detail,
    ), detail


def test_batching_rule_that_mixes_rows(name):
    op = XLACustomKernel(name)
    op.def_jax_kernel(lambda outs: lambda x: 2 * x)

    @op.def_batching_rule
    def _rule(args, dims, *, outs):
        x = jnp.moveaxis(args[0], dims[0], 0)
        return [jnp.roll(2 * x, 1, axis=0)], [0]  # row b gets row b - 1

    report = check_kernel(op, X, kwargs={"outs": _struct(X)}, raises=False, checks=["vmap"])
    row = _row(report, "vmap: batch axis 0")
    assert row.status is Status.FAILED
    assert row.detail.startswith("output 0 at index (0, 0): loop 2.0, vmap ")


def test_backend_that_disagrees_in_one_element(name):
    op = XLACustomKernel(name)
    op.def_jax_kernel(lambda outs: lambda x: 2 * x)
    op.def_kernel("off_by_one", "cpu", lambda outs: lambda x: (2 * x).at[2].add(1))
    with pytest.raises(AssertionError) as info:
        check_kernel(op, X, kwargs={"outs": _struct(X)}, checks=["backends"])
    header = f"check_kernel({name}): 1 of 1 checks failed\n"
    assert str(info.value).startswith(header + "check ")
    report = check_kernel(op, X, kwargs={"outs": _struct(X)}, checks=["backends"], raises=False)
    assert report.failed == (
        CheckResult(
            "backends: backend 'off_by_one'",
            Status.FAILED,
            "output 0 at index (2,): default 6.0, backend 'off_by_one' 7.0 (1 of 4 elements "
            "differ, by up to 1; rtol=0.0001, atol=0.0001)",
        ),
    )


def test_backend_that_disagrees_through_the_call_function(name):
    op = XLACustomKernel(name)
    op.def_jax_kernel(lambda outs: lambda x: 2 * x)
    op.def_kernel("off_by_one", "cpu", lambda outs: lambda x: (2 * x).at[2].add(1))
    op.def_call(lambda x: op(x, outs=_struct(x)))
    report = check_kernel(
        op, X, checks=["backends", "vmap: backend 'off_by_one', batch axis 0"], raises=False
    )
    # vmap of the backend agrees with a loop over the same backend.
    assert [(r.check, r.status) for r in report.results] == [
        ("backends: backend 'off_by_one'", Status.FAILED),
        ("vmap: backend 'off_by_one', batch axis 0", Status.PASSED),
    ]


def test_inputs_are_named_by_the_call_functions_parameters(name):
    # Through its call function (no `outs` in kwargs), `differentiable=` takes
    # the call function's parameter names, and a failed row names the input.
    op = XLACustomKernel(name)
    op.def_jax_kernel(lambda outs: lambda x, v: x * v)
    op.def_jvp_rule2(None, lambda t, x, v, outs: 3 * x * t)  # the derivative in v is x

    @op.def_call
    def _call(x, v):
        return op(x, v, outs=_struct(v))

    report = check_kernel(
        op, X, X, checks=["autodiff: JVP vs finite differences"], differentiable=["v"], raises=False
    )
    (row,) = report.failed
    assert row.detail.startswith("input 1 (`v`): output 0 at index (0,): "), row.detail
    assert check_kernel(op, X, X, checks=["backends"], differentiable=["v"]).ok


def test_backends_of_a_function_that_calls_the_kernel(name):
    op = XLACustomKernel(name)
    op.def_jax_kernel(lambda outs: lambda x: 2 * x)
    op.def_kernel("off_by_one", "cpu", lambda outs: lambda x: (2 * x).at[2].add(1))

    def f(x):
        return op(x, outs=_struct(x)) + 1

    report = check_kernel(f, X, backends_of=op, checks=["backends"], raises=False)
    assert [r.check for r in report.failed] == ["backends: backend 'off_by_one'"]


def _python_op(prefix, handler, x):
    target = ffi_core.bridge.target_name(prefix, id(handler))
    ffi_core.bridge.register_target(
        target, ffi_core.abi.python_handler(handler, name=target), content=repr(id(handler))
    )
    call = jax.ffi.ffi_call(target, _struct(x), vmap_method="sequential")

    def op(x):
        return call(x)

    op.__name__ = prefix
    return op


def test_kernel_that_keeps_state_between_calls():
    calls = [0]

    def handler(frame):
        (x,), (out,) = frame.args, frame.rets
        calls[0] += 1  # adds how many calls came before: state kept between calls
        out.as_numpy()[...] = x.as_numpy() + calls[0]

    op = _python_op("check_kernel_tests.stateful", handler, X)
    report = check_kernel(op, X, raises=False, checks=["results"])
    row = _row(report, "results: repeated call")
    assert row.status is Status.FAILED
    assert row.detail.startswith("output 0 at index (0,): first call ")


@numba.njit
def _double(x, out):
    for i in range(x.size):
        out[i] = 2 * x[i]


@numba.njit
def _double_rows_past_the_end(x, out):
    # Rows last to first; each also writes the first element of the next row.
    for b in range(x.shape[0] - 1, -1, -1):
        for i in range(x.shape[1]):
            out[b, i] = 2 * x[b, i]
        if b + 1 < x.shape[0]:
            out[b + 1, 0] = 2 * x[b, 0]


def test_kernel_that_writes_past_its_row_under_vmap(name):
    op = XLACustomKernel(name)
    op.def_numba_kernel(lambda outs: _double)

    @op.def_batching_rule
    def _rule(args, dims, *, outs):
        x = jnp.moveaxis(args[0], dims[0], 0)
        return [numba_kernel(_double_rows_past_the_end, _struct(x))(x)], [0]

    report = check_kernel(
        op, X, kwargs={"outs": _struct(X)}, raises=False, checks=["vmap: batch axis 0"]
    )
    row = _row(report, "vmap: batch axis 0")
    assert row.status is Status.FAILED
    assert row.detail.startswith("output 0 at index (1, 0): loop ")


def test_handler_that_is_not_thread_safe():
    scratch = np.zeros(X.shape, np.float32)  # one buffer shared by every call

    def handler(frame):
        (x,), (out,) = frame.args, frame.rets
        scratch[...] = x.as_numpy() * 2
        time.sleep(0.002)  # another call can overwrite scratch meanwhile
        out.as_numpy()[...] = scratch

    op = _python_op("check_kernel_tests.shared_scratch", handler, X)
    report = check_kernel(op, X, raises=False, checks=["threads"])
    row = _row(report, "threads: concurrent calls")
    assert row.status is Status.FAILED, str(report)
    assert re.match(r"thread \d: output 0 at index \(\d,\): alone ", row.detail), row.detail
