"""Tutorial 8: prove an operation right under every JAX transform with ``check_kernel``.

Run it: ``uv run python docs/checking_kernels.py``. Every step asserts its
result, so this file doubles as a test (CI runs it).

A custom operation is a JAX primitive with rules of its own: a batching rule,
a JVP rule, a transpose rule, one kernel per backend. Each rule can be wrong
in a way no single test shows. ``check_kernel(op, *inputs)`` checks them all
in one call: eager vs ``jit`` vs a reference, every backend, ``vmap`` against
a loop (batch axis first and last, batched and unbatched inputs, nested), the
JVP against finite differences, the transpose against the JVP, compilation
counts, export in a fresh process, aliases, 8 threads, bad inputs. In a test
it raises one ``AssertionError`` listing every failed check.

``check_kernel`` is the kernel-check package's (``from kernel_check import
check_kernel``), a test dependency: add ``kernel-check`` to your tests'
dependencies. For an ``XLACustomKernel``, ``xla_custom_kernel.testing.check_kernel``
(used here; xla-custom-kernel depends on kernel-check) also checks every backend.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numba
import numpy as np
import xla_custom_kernel as xck
from jax.interpreters import ad
from xla_custom_kernel.testing import Status, check_kernel

# --- 1. An operation: a * x + b * y, with two backends and AD rules ----------


@numba.njit
def axpby_numba(x, y, out, a, b):
    for i in range(x.size):
        out[i] = a * x[i] + b * y[i]


def numba_generator(outs, a, b):
    @numba.njit
    def kernel(x, y, out):
        axpby_numba(x, y, out, a, b)

    return kernel


axpby = xck.XLACustomKernel("tutorial_axpby", doc="a * x + b * y for vectors x, y")
axpby.def_numba_kernel(numba_generator)  # the default on CPU
axpby.def_jax_kernel(lambda outs, a, b: lambda x, y: a * x + b * y)

# Linear in x and in y: the tangent is the operation on the tangents, and the
# transpose scales the cotangent.
axpby.def_jvp_rule2(
    lambda t, x, y, outs, a, b: axpby(t, jnp.zeros_like(y), outs=outs, a=a, b=b),
    lambda t, x, y, outs, a, b: axpby(jnp.zeros_like(x), t, outs=outs, a=a, b=b),
)


@axpby.def_transpose_rule
def _axpby_transpose(cts, x, y, *, outs, a, b):
    (ct,) = cts
    return [
        a * ct if ad.is_undefined_primal(x) else None,
        b * ct if ad.is_undefined_primal(y) else None,
    ]


@axpby.def_call
def _axpby_call(x, y, *, a=2.0, b=-1.0):
    # Inputs are checked before a kernel sees them: a Numba kernel does not
    # check bounds, and check_kernel's bad-input rows make sure of this.
    for i, (name, v) in enumerate((("x", x), ("y", y))):
        if jnp.dtype(v.dtype) not in (jnp.float32, jnp.float64):
            raise TypeError(f"input {i} (`{name}`) must be float32 or float64, got {v.dtype}")
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(
            f"input 0 (`x`) must be a vector of the shape of `y`, got {x.shape} and {y.shape}"
        )
    return axpby(x, y, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), a=a, b=b)


# --- 2. The same operation with a wrong transpose rule -----------------------

broken = xck.XLACustomKernel("tutorial_axpby_broken")
broken.def_jax_kernel(lambda outs, a, b: lambda x, y: a * x + b * y)
broken.def_jvp_rule2(
    lambda t, x, y, outs, a, b: broken(t, jnp.zeros_like(y), outs=outs, a=a, b=b),
    lambda t, x, y, outs, a, b: broken(jnp.zeros_like(x), t, outs=outs, a=a, b=b),
)
# The mistake: y's cotangent scaled by a, not b.
broken.def_transpose_rule(lambda cts, x, y, *, outs, a, b: [a * cts[0], a * cts[0]])

X = np.linspace(-1.0, 1.0, 6, dtype=np.float32)
Y = np.linspace(0.5, 2.0, 6, dtype=np.float32)


def test_axpby():
    # What a test suite holds: one call; it raises AssertionError listing
    # every failed check. For an op defined in a package, the export check's
    # fresh process imports the modules defining its kernels (found from the
    # generators, or given in `export_imports`). This file runs as __main__,
    # which no other process can import: its kernels' FFI names include the
    # module, so the row is left out, with the reason shown in the report.
    return check_kernel(
        axpby,
        X,
        Y,
        reference=lambda x, y: 2.0 * x - y,
        other_args=(np.ones(9, np.float32), np.ones(9, np.float32)),
        skip={"export": "the tutorial runs as __main__, which a fresh process cannot import"},
    )


def main() -> None:
    # --- 1. The report: one row per check ----------------------------------
    report = test_axpby()
    print(report)
    assert report.ok
    assert {row.family for row in report.passed} >= {
        "results",
        "backends",
        "vmap",
        "autodiff",
        "compile",
        "aliases",
        "threads",
        "bad_inputs",
    }

    # --- 2. A wrong rule: the row that fails names it and the first wrong element
    outs = jax.ShapeDtypeStruct(X.shape, X.dtype)
    report = check_kernel(
        broken, X, Y, kwargs={"outs": outs, "a": 2.0, "b": -1.0}, checks=["autodiff"], raises=False
    )
    print(report)
    row = next(r for r in report.failed if r.check.startswith("autodiff: transpose"))
    print("failed:", row.detail)
    assert row.detail.startswith("input 1: <J v, w> = ")
    assert "at index (0,) of its cotangent" in row.detail

    # In a test, the same call raises one AssertionError naming every failure.
    try:
        check_kernel(broken, X, Y, kwargs={"outs": outs, "a": 2.0, "b": -1.0}, checks=["autodiff"])
    except AssertionError as exc:
        assert "autodiff: transpose vs JVP (dot-product test)  failed" in str(exc)
    else:
        raise AssertionError("check_kernel passed a wrong transpose rule")

    # --- 3. An op without AD rules is reported, not failed ------------------
    # Differentiating it raises NotImplementedError naming the kernel; the
    # autodiff row is skipped with that reason.
    no_rules = xck.XLACustomKernel("axpby_no_rules")
    no_rules.def_numba_kernel(numba_generator)
    kwargs = {"outs": outs, "a": 2.0, "b": -1.0}
    report = check_kernel(no_rules, X, Y, kwargs=kwargs, checks=["autodiff"], raises=False)
    (row,) = report.results
    assert row.status is Status.SKIPPED, report
    assert row.detail.startswith("the op has no JVP rule (NotImplementedError"), row.detail
    print(report)
    print("all steps passed")


if __name__ == "__main__":
    main()
