"""kernel_check.check_kernel: the report, the comparison, the options, and the checks on
plain JAX functions (any JAX callable is an operation to check_kernel)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ffi_core import ShardingRule
from ffi_core.bridge import BoundPrimitive, partitioned_call
from jax.extend.core import Primitive
from jax.interpreters import mlir
from kernel_check import (
    CHECKS,
    TOLERANCES,
    CheckReport,
    CheckResult,
    Status,
    check_kernel,
    first_difference,
    tolerance,
)

X = jnp.array([1.0, 2.0, 3.0, 4.0], jnp.float32)


def _rows(report, family):
    return {r.check: r for r in report.results if r.family == family}


def test_first_difference_names_output_and_element():
    a = [np.zeros((2, 2), np.float32), np.arange(3)]
    b = [np.zeros((2, 2), np.float32), np.array([0, 1, 5])]
    assert first_difference(a, b, names=("loop", "vmap")) == (
        "output 1 at index (2,): loop 2, vmap 5 (1 of 3 elements differ, by up to 3; "
        "rtol=0, atol=0)"
    )
    assert first_difference(a, a) is None
    assert (
        first_difference([np.zeros(2)], [np.zeros(3)])
        == "output 0 is float64[3], expected float64[2]"
    )


def test_tolerances_are_per_dtype():
    assert TOLERANCES["float32"] == (1e-4, 1e-4)
    assert first_difference([np.float32([1.0])], [np.float32([1.00001])]) is None
    assert first_difference([np.float64([1.0])], [np.float64([1.00001])]) is not None
    assert tolerance("float64", {"float64": (1e-3, 0.0)}) == (1e-3, 0.0)


def test_report_table_and_assertion():
    report = CheckReport(
        "op",
        (
            CheckResult("results: eager vs jit", Status.PASSED),
            CheckResult(
                "vmap: batch axis 0", Status.FAILED, "output 0 at index (1, 0): loop 1, vmap 2"
            ),
            CheckResult("autodiff", Status.SKIPPED, "the op has no JVP rule"),
        ),
    )
    assert str(report) == (
        "check_kernel(op): 1 passed, 1 failed, 1 skipped\n"
        "check                  status   detail\n"
        "---------------------  -------  ------\n"
        "results: eager vs jit  passed\n"
        "vmap: batch axis 0     failed   output 0 at index (1, 0): loop 1, vmap 2\n"
        "autodiff               skipped  the op has no JVP rule"
    )
    with pytest.raises(AssertionError) as info:
        report.raise_for_failures()
    assert str(info.value) == (
        "check_kernel(op): 1 of 3 checks failed\n"
        "check               status  detail\n"
        "------------------  ------  ------\n"
        "vmap: batch axis 0  failed  output 0 at index (1, 0): loop 1, vmap 2"
    )


def test_plain_jax_function_passes():
    def op(x, y):
        return jnp.sin(x) * y, (x > 2).astype(jnp.int32)

    # jnp broadcasts ranks: nothing to refuse there. It promotes dtypes, and
    # gives the right results on int32 inputs, which the dtype row checks.
    report = check_kernel(
        op,
        X,
        X[::-1],
        reference=lambda x, y: (np.sin(x) * y, (x > 2).astype(np.int32)),
        skip=["bad_inputs: rank"],
    )
    assert report.ok
    assert _rows(report, "autodiff")["autodiff: JVP vs finite differences"].detail == "in float64"
    assert report.results[-1] == CheckResult(
        "bad_inputs: one input too many",
        Status.PASSED,
        "3 inputs: TypeError: test_plain_jax_function_passes.<locals>.op() takes 2 positional "
        "arguments but 3 were given",
    )


def test_reference_that_disagrees():
    report = check_kernel(
        jnp.cumsum,
        X,
        reference=lambda x: jnp.cumsum(x).at[3].set(0),
        checks=["results"],
        raises=False,
    )
    assert report.failed == (
        CheckResult(
            "results: reference",
            Status.FAILED,
            "output 0 at index (3,): reference 0.0, op 10.0 (1 of 4 elements differ, by up to 10; "
            "rtol=0.0001, atol=0.0001)",
        ),
    )


def test_selected_rows_and_skipped_rows():
    report = check_kernel(
        jnp.sin, X, checks=["vmap: nested", "results"], skip=["results: reference"]
    )
    assert [r.check for r in report.results] == [
        "results: eager vs jit",
        "results: repeated call",
        "results: reference",
        "vmap: nested",
    ]
    assert report.results[2] == CheckResult(
        "results: reference", Status.SKIPPED, "left out by `skip`"
    )


def test_sharding_rule_of_a_plain_function():
    report = check_kernel(jnp.sin, X, checks=["sharding"], sharding_rule="i -> i")
    assert [(r.check, r.status) for r in report.results] == [
        ("sharding: sharded jit", Status.PASSED),
        ("sharding: shard_map", Status.PASSED),
    ]
    report = check_kernel(jnp.sin, X, checks=["sharding"], sharding_rule="i, i -> i", raises=False)
    assert report.failed == (
        CheckResult(
            "sharding",
            Status.FAILED,
            "the sharding rule does not fit the sample inputs: "
            + report.failed[0].detail.split(": ", 1)[1],
        ),
    )
    assert check_kernel(jnp.sin, X, checks=["sharding"]).results == (
        CheckResult("sharding", Status.SKIPPED, "the op declares no sharding rule"),
    )


def test_op_that_fails_eagerly():
    def op(x):
        raise ValueError("input 0 is wrong")

    with pytest.raises(
        AssertionError,
        match=re.escape("results: eager  failed  the op raised ValueError: input 0 is wrong"),
    ):
        check_kernel(op, X)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"checks": "vmap"},
            TypeError,
            "`checks` must be a collection of check names, got the str 'vmap'",
        ),
        (
            {"skip": ["vmaps"]},
            ValueError,
            f"`skip` names unknown checks ['vmaps']; the checks are {', '.join(CHECKS)} "
            "(or one row of a check, as the report names it: 'bad_inputs: dtype')",
        ),
        ({"batch_size": 1}, ValueError, "`batch_size` must be at least 2, got 1"),
        ({"threads": 2.0}, TypeError, "`threads` must be an int, got <class 'float'>"),
        ({"reference": 1}, TypeError, "`reference` must be callable or None, got <class 'int'>"),
        ({"kwargs": [1]}, TypeError, "`kwargs` must be a mapping or None, got <class 'list'>"),
        (
            {"tolerances": [1]},
            TypeError,
            "`tolerances` must be a mapping {dtype name: (rtol, atol)} or None, got <class 'list'>",
        ),
        (
            {"tolerances": {"float32": (1e-3,)}},
            ValueError,
            "`tolerances` must map dtype names to (rtol, atol), two numbers >= 0, got "
            "'float32': (0.001,)",
        ),
        (
            {"vmap_methods": "sequential"},
            TypeError,
            "`vmap_methods` must be a sequence of str or None, got 'sequential'",
        ),
        (
            {"other_args": 3},
            TypeError,
            "`other_args` must be a sequence of arrays, got <class 'int'>",
        ),
        (
            {"aliases": {0: "0"}},
            TypeError,
            "`aliases` must be a mapping {input: output} of ints, got {0: '0'}",
        ),
        (
            {"export_imports": "mymodule"},
            TypeError,
            "`export_imports` must be a sequence of module names (str), got 'mymodule'",
        ),
        (
            {"tolerances": {"flaot32": (1e-3, 1e-3)}},
            ValueError,
            "`tolerances` names 'flaot32', which is not a dtype's name; dtype names such as "
            "'float16', 'bfloat16', 'float32'",
        ),
        (
            {"other_args": [X, X]},
            ValueError,
            "`other_args` must hold as many arrays as the op is given inputs (1), got 2",
        ),
        (
            {"aliases": {7: 0}},
            ValueError,
            "`aliases` maps input 7 to output 0: inputs are 0 to 0 and outputs are counted from 0",
        ),
        (
            {"aliases": {-1: 0}},
            ValueError,
            "`aliases` maps input -1 to output 0: inputs are 0 to 0",
        ),
        (
            {"variants": 5},
            TypeError,
            "`variants` must be a mapping {name (str): callable} or None, got 5",
        ),
        (
            {"variants": {"twice": 2}},
            TypeError,
            "`variants` must be a mapping {name (str): callable} or None, got {'twice': 2}",
        ),
        (
            {"skip": {"vmap": 5}},
            TypeError,
            "`skip` given as a mapping must map check names to reasons (str), got {'vmap': 5}",
        ),
        ({"checks": [5]}, TypeError, "`checks` must be a collection of check names (str), got [5]"),
        ({"raises": "no"}, TypeError, "`raises` must be a bool, got <class 'str'>"),
        ({"sharding_rule": 5}, TypeError, "`sharding_rule` must be None, a str or an"),
        (
            {"checks": ["results: nosuch row"]},
            ValueError,
            "`checks` names rows ['results: nosuch row'], which no check reported for this op",
        ),
    ],
)
def test_bad_options(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        check_kernel(jnp.sin, X, **kwargs)


def test_op_must_be_callable():
    with pytest.raises(TypeError, match=re.escape("`op` must be callable, got <class 'int'>")):
        check_kernel(1, X)


def test_vmap_methods_of_a_plain_function_are_skipped():
    report = check_kernel(jnp.sin, X, checks=["vmap"], vmap_methods=["sequential"])
    assert report.results[-1] == CheckResult(
        "vmap: vmap_method", Status.SKIPPED, "the op makes no call that has a vmap_method"
    )


def test_ffi_call_vmap_methods_are_rewritten():
    # jax.ffi.ffi_call's vmap_method is replaced as a bridge's is, except by
    # None, which ffi_call does not take.
    from kernel_check._vmap import with_vmap_method

    call = jax.ffi.ffi_call(
        "ffi_core_tests.never_lowered",
        jax.ShapeDtypeStruct(X.shape, X.dtype),
        vmap_method="broadcast_all",
    )
    rewritten = with_vmap_method(call, (X,), "sequential")
    jaxpr = jax.make_jaxpr(rewritten)(X)
    assert [e.params["vmap_method"] for e in jaxpr.eqns if e.primitive.name == "ffi_call"] == [
        "sequential"
    ]
    jaxpr = jax.make_jaxpr(with_vmap_method(call, (X,), None))(X)
    assert [e.params["vmap_method"] for e in jaxpr.eqns if e.primitive.name == "ffi_call"] == [
        "broadcast_all"
    ]


def test_skip_with_reasons():
    report = check_kernel(
        jnp.sin,
        X,
        checks=["results", "export"],
        skip={"export": "no fresh process here", "results: reference": "none exists"},
    )
    assert report.results[2:] == (
        CheckResult("results: reference", Status.SKIPPED, "none exists"),
        CheckResult("export", Status.SKIPPED, "no fresh process here"),
    )


def test_bad_inputs_are_compiled_never_run():
    ran = []

    def op(x):
        # Refuses nothing, and would show if it ran: the checks only compile it.
        return jax.pure_callback(
            lambda v: ran.append(v) or v, jax.ShapeDtypeStruct(x.shape, x.dtype), x
        )

    report = check_kernel(op, X, checks=["bad_inputs: rank"], raises=False)
    assert report.failed == (
        CheckResult(
            "bad_inputs: rank", Status.FAILED, "input 0 with rank 2 was accepted without an error"
        ),
    )
    assert [np.ndim(v) for v in ran] == [1]  # the sample inputs' own call only


def _dtype_row(op):
    (row,) = check_kernel(op, X, checks=["bad_inputs: dtype"], raises=False).results
    return row


def test_an_op_that_takes_another_dtype_and_computes_it_right_passes():
    assert _dtype_row(lambda x: 2 * x) == CheckResult(
        "bad_inputs: dtype",
        Status.PASSED,
        "input 0 as int32 accepted: the op's results on the same values as float32",
    )


def test_an_op_that_takes_another_dtype_and_computes_it_wrong_fails():
    def op(x):
        return 2 * x if x.dtype == jnp.float32 else 3 * x

    assert _dtype_row(op) == CheckResult(
        "bad_inputs: dtype",
        Status.FAILED,
        "input 0 as int32 was accepted and gave a wrong result (output 0 at index (0,): with "
        "float32 2, with int32 3 (4 of 4 elements differ, by up to 4; rtol=0, atol=0)); refuse "
        "the dtype with a TypeError naming the input, or compute it right",
    )


def test_an_op_that_refuses_another_dtype_clearly_passes():
    def op(x):
        if x.dtype != jnp.float32:
            raise TypeError(f"input 0 must be float32, got {x.dtype}")
        return 2 * x

    assert _dtype_row(op) == CheckResult(
        "bad_inputs: dtype",
        Status.PASSED,
        "input 0 as int32: TypeError: input 0 must be float32, got int32",
    )


def test_an_op_that_fails_on_another_dtype_without_a_clear_error_fails():
    def op(x):
        if x.dtype != jnp.float32:
            raise RuntimeError("no kernel for this")
        return 2 * x

    assert _dtype_row(op) == CheckResult(
        "bad_inputs: dtype",
        Status.FAILED,
        "input 0 as int32 raised RuntimeError: no kernel for this, not a TypeError or ValueError",
    )


def test_jvp_rule_that_mixes_rows_under_vmap():
    def tangent(t):
        out = 2 * t
        return np.roll(out, 1, axis=0) if out.ndim > 1 else out  # batched: rows shift

    @jax.custom_jvp
    def op(x):
        return 2 * x

    @op.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        shape = jax.ShapeDtypeStruct(t.shape, t.dtype)
        return op(x), jax.pure_callback(tangent, shape, t, vmap_method="broadcast_all")

    report = check_kernel(
        op,
        X,
        checks=["autodiff: JVP vs finite differences", "autodiff: JVP under vmap"],
        raises=False,
    )
    assert [(r.check, r.status) for r in report.results] == [
        ("autodiff: JVP vs finite differences", Status.PASSED),
        ("autodiff: JVP under vmap", Status.FAILED),
    ]
    assert report.failed[0].detail.startswith("output 0 at index (0, 0): loop ")


def _custom_vjp_square(scale):
    @jax.custom_vjp
    def op(x):
        return x * x

    def fwd(x):
        return x * x, x

    def bwd(x, ct):
        return (scale * x * ct,)

    op.defvjp(fwd, bwd)
    return op


def test_custom_vjp_op_is_checked_in_reverse_mode_only():
    report = check_kernel(_custom_vjp_square(2.0), X, checks=["autodiff"])
    rows = _rows(report, "autodiff")
    assert rows["autodiff: JVP vs finite differences"].status is Status.SKIPPED
    assert rows["autodiff: JVP vs finite differences"].detail.startswith(
        "the op is a jax.custom_vjp function: reverse mode only"
    )
    assert rows["autodiff: grad of a scalar loss"].status is Status.PASSED


def test_custom_vjp_op_with_a_wrong_backward_fails():
    report = check_kernel(_custom_vjp_square(3.0), X, checks=["autodiff"], raises=False)
    row = _rows(report, "autodiff")["autodiff: grad of a scalar loss"]
    assert row.status is Status.FAILED
    assert row.detail.startswith("input 0 (`x`): <grad, v> = ")


# An op partitioned by its rule (a primitive lowered by jnp code standing for a
# bridge's native call): out[i] = v[i] * combine(w), combine a sum or a max.
def _combining_op(rule, combine):
    prim = Primitive(f"ffi_core_test_combine_{combine.__name__}")
    prim.multiple_results = True
    prim.def_abstract_eval(lambda w, v, *, out_avals: list(out_avals))
    prim.def_impl(lambda w, v, *, out_avals: [v * combine(w)])
    mlir.register_lowering(
        prim,
        mlir.lower_fun(lambda w, v, *, out_avals: [v * combine(w)], multiple_results=True),
    )

    def op(w, v):
        out_avals = (jax.core.ShapedArray(v.shape, v.dtype),)
        resolved = rule.resolve([w.shape, v.shape], [v.shape], name="kernel 'combine'")
        return partitioned_call(BoundPrimitive(prim, ()), [w, v], out_avals, resolved)[0]

    return op


W = jnp.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0], jnp.float32)


def test_sharding_splits_the_factors_a_rule_keeps_whole():
    # Shardy wants special factors in rule order: "k" (implicitly whole) comes
    # before "i" here, which the rule names to keep whole.
    rule = ShardingRule("k, i -> i", need_replication_factors=("i",))
    op = _combining_op(rule, jnp.sum)
    report = check_kernel(op, W, X, checks=["sharding"], sharding_rule=rule)
    assert report.results == (
        CheckResult(
            "sharding: sharded jit",
            Status.SKIPPED,
            "no factor of the rule 'k, i -> i' that an output carries divides among devices",
        ),
        CheckResult(
            "sharding: shard_map",
            Status.SKIPPED,
            "no factor of the rule 'k, i -> i' that an output carries divides among devices",
        ),
        CheckResult(
            "sharding: whole factors split in the inputs",
            Status.PASSED,
            "'k', 'i' gathered by the rule, results agree",
        ),
    )


def test_sharding_splits_a_reduction_factor():
    rule = ShardingRule("k, i -> i", reduction_factors=("k",))
    report = check_kernel(
        _combining_op(rule, jnp.sum), W, X, checks=["sharding"], sharding_rule=rule
    )
    assert [(r.check, r.status, r.detail) for r in report.results] == [
        (
            "sharding: sharded jit",
            Status.PASSED,
            "'i' split over 4 devices; device 0 computed 1 of 4",
        ),
        ("sharding: shard_map", Status.PASSED, "'i' split over 4 devices"),
        (
            "sharding: reduction factor split",
            Status.PASSED,
            "'k' split over 4 devices, the partial results summed",
        ),
    ]
    # A maximum is no sum of the shards' maxima: declared a reduction, it fails.
    wrong = _combining_op(rule, jnp.max)
    report = check_kernel(wrong, W, X, checks=["sharding"], sharding_rule=rule, raises=False)
    assert [(r.check, r.detail.split(":")[0]) for r in report.failed] == [
        ("sharding: reduction factor split", "output 0 at index (0,)"),
    ]


def test_sharding_whole_factor_row_fails_where_the_op_splits_it():
    # The op's own rule sums over "k", but check_kernel is told "k" stays whole
    # (implied: an input-only factor, not a reduction one): splitting "k" in the
    # inputs shows the op's results change.
    op = _combining_op(ShardingRule("k, i -> i", reduction_factors=("k",)), jnp.max)
    report = check_kernel(op, W, X, checks=["sharding"], sharding_rule="k, i -> i", raises=False)
    assert [(r.check, r.detail.split(": ")[0]) for r in report.failed] == [
        ("sharding: whole factors split in the inputs", "'k' kept whole"),
    ]


# data * v, whose JVP rule covers v only (the tangent of `data` is dropped):
# right when only v is differentiated.
@jax.custom_jvp
def _scale_by_data(data, v):
    return data * v


@_scale_by_data.defjvp
def _scale_by_data_jvp(primals, tangents):
    data, v = primals
    return data * v, data * tangents[1]


def test_differentiable_inputs_are_the_ones_named():
    data = X + 1.0
    report = check_kernel(_scale_by_data, data, X, checks=["autodiff"], raises=False)
    assert [r.check for r in report.failed] == [
        "autodiff: JVP vs finite differences",
        "autodiff: grad of a scalar loss",
        "autodiff: second order (check_grads)",
    ]
    hint = (
        "; if the op is not differentiable in input 0 (`data`), name the inputs it is "
        "differentiable in with `differentiable=`"
    )
    jvp = report.failed[0].detail
    assert re.fullmatch(
        r"input 0 \(`data`\): output 0 at index \(\d,\): finite differences give \S+, "
        r"the JVP rule gives \S+ \(in float64; rtol=1e-06\)" + re.escape(hint),
        jvp,
    ), jvp
    assert report.failed[1].detail.startswith("input 0 (`data`): <grad, v> = ")
    for differentiable in [("v",), (1,), [1, "v"]]:
        report = check_kernel(
            _scale_by_data, data, X, checks=["autodiff"], differentiable=differentiable
        )
        assert report.ok and len(report.passed) == 6
    report = check_kernel(_scale_by_data, data, X, checks=["autodiff"], differentiable=())
    assert report.results == (
        CheckResult("autodiff", Status.SKIPPED, "`differentiable` names no input"),
    )


@pytest.mark.parametrize(
    ("differentiable", "error", "message"),
    [
        (
            "v",
            TypeError,
            "`differentiable` must be a collection of input positions (int) or the op's "
            "parameter names (str), got 'v'",
        ),
        (
            [1.0],
            TypeError,
            "`differentiable` must be a collection of input positions (int) or the op's "
            "parameter names (str), got [1.0]",
        ),
        (
            ["w"],
            ValueError,
            "`differentiable` names 'w', which is not a parameter of the op; its positional "
            "parameters: data, v",
        ),
        (
            [2],
            ValueError,
            "`differentiable` names input 2, but the op is given 2 inputs (0 to 1)",
        ),
    ],
)
def test_bad_differentiable(differentiable, error, message):
    with pytest.raises(error, match=re.escape(message)):
        check_kernel(_scale_by_data, X, X, differentiable=differentiable)


def test_differentiable_refuses_an_integer_input():
    def op(x, indices):
        return x[indices]

    with pytest.raises(
        ValueError,
        match=re.escape(
            "`differentiable` names input 1 (`indices`), of dtype int32; only floating-point "
            "and complex inputs are differentiated"
        ),
    ):
        check_kernel(op, X, jnp.arange(2), differentiable=["indices"])


def test_other_args_take_their_own_keywords():
    def op(x, *, shape):  # a static keyword that follows the input's size
        return jnp.reshape(x * 2.0, shape)

    other = jnp.ones(6, jnp.float32)
    report = check_kernel(
        op, X, kwargs={"shape": (2, 2)}, other_args=(other,), checks=["compile"], raises=False
    )
    row = _rows(report, "compile")["compile: new shape"]
    assert row.status is Status.FAILED
    assert row.detail.startswith("raised TypeError: cannot reshape array of shape (6,)")
    report = check_kernel(
        op,
        X,
        kwargs={"shape": (2, 2)},
        other_args=(other,),
        other_kwargs={"shape": (3, 2)},
        checks=["compile"],
    )
    assert _rows(report, "compile")["compile: new shape"] == CheckResult(
        "compile: new shape", Status.PASSED, "the FFI targets registered for the first shape served"
    )
    with pytest.raises(
        TypeError, match=re.escape("`other_kwargs` must be a mapping or None, got <class 'list'>")
    ):
        check_kernel(op, X, kwargs={"shape": (2, 2)}, other_kwargs=[("shape", (3, 2))])
