"""Checks of autodiff: the JVP against central finite differences, the
transpose against the JVP (the dot-product test), ``jax.grad`` of a scalar
loss, and second order (``jax.test_util.check_grads``).

In float64 where the op takes it (the check casts its floating-point inputs;
an op that refuses them is checked in its own dtypes, with looser
tolerances). An op without a JVP or transpose rule is reported so, skipped.
The inputs differentiated are those ``differentiable`` names (default: every
floating-point one); a failure names the input whose rule is wrong.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import test_util

from ._case import Case, describe_error, is_inexact, row_inputs
from ._report import CheckResult, Status, failed, passed, skipped

__all__ = ["check_autodiff"]

# (finite-difference step, rtol) by the precision the check runs in.
_FD = {"float64": (1e-6, 1e-6), "float32": (1e-3, 2e-2)}


def _wide(x: Any) -> Any:
    x = jnp.asarray(x)
    if not is_inexact(x):
        return x
    return x.astype(jnp.complex128 if jnp.iscomplexobj(x) else jnp.float64)


class _Problem:
    """The op restricted to its floating-point inputs and outputs."""

    def __init__(self, case: Case, args: Sequence[Any]) -> None:
        self.case = case
        self.args = list(args)
        chosen = case.options.differentiable
        self.diff = [
            i for i, x in enumerate(args) if is_inexact(x) and (chosen is None or i in chosen)
        ]
        leaves = jax.tree.leaves(jax.eval_shape(case.fn, *args))
        self.outs = [k for k, leaf in enumerate(leaves) if is_inexact(leaf)]

    def __call__(self, *primals: Any) -> tuple[Any, ...]:
        full = list(self.args)
        for i, p in zip(self.diff, primals, strict=True):
            full[i] = p
        leaves = jax.tree.leaves(self.case.fn(*full))
        return tuple(leaves[k] for k in self.outs)

    @property
    def primals(self) -> list[Any]:
        return [self.args[i] for i in self.diff]


def _random_like(xs: Sequence[Any], seed: int) -> list[Any]:
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.standard_normal(np.shape(x)), dtype=x.dtype) for x in xs]


def _dot(a: Sequence[Any], b: Sequence[Any]) -> float:
    return float(sum(jnp.vdot(x, y).real for x, y in zip(a, b, strict=True)))


def _precision(case: Case) -> tuple[Any, Callable[[], Any], str]:
    # float64 inputs where the op takes them: the JVP check then measures the
    # rule, not rounding. jax.enable_x64 is a context (thread-local), so the
    # caller's setting is left alone.
    try:
        with jax.enable_x64(True):
            wide = [_wide(x) for x in case.args]
            outs = jax.tree.leaves(jax.block_until_ready(case.fn(*wide)))
    except Exception as exc:  # refused: check in the op's own dtypes
        return (
            list(case.args),
            contextlib.nullcontext,
            f"float64 inputs refused ({describe_error(exc)})",
        )
    narrow = sorted({o.dtype.name for o in outs if is_inexact(o) and np.finfo(o.dtype).bits < 64})
    if narrow:
        return (
            list(case.args),
            contextlib.nullcontext,
            f"on float64 inputs the op returns {', '.join(narrow)}",
        )
    return wide, lambda: jax.enable_x64(True), "float64"


def check_autodiff(case: Case) -> list[CheckResult]:
    """JVP vs finite differences, transpose vs JVP, grad, second order."""
    if not any(is_inexact(x) for x in case.args):
        why = "the op has no floating-point input"
        return case.run("autodiff", lambda: skipped("autodiff", why))
    if case.options.differentiable == ():
        why = "`differentiable` names no input"
        return case.run("autodiff", lambda: skipped("autodiff", why))
    args, precision, note = _precision(case)
    fd_key = "float64" if note == "float64" else "float32"
    with precision():
        problem = _Problem(case, args)
        if not problem.outs:
            why = "the op has no floating-point output"
            return case.run("autodiff", lambda: skipped("autodiff", why))
        primals = problem.primals
        tangents = _random_like(primals, 1)
        try:
            _, jvp_out = jax.jvp(problem, primals, tangents)
        except NotImplementedError as exc:
            why = f"the op has no JVP rule ({describe_error(exc)})"
            return case.run("autodiff", lambda: skipped("autodiff", why))
        except TypeError as exc:
            if "custom_vjp" not in str(exc):
                raise
            # A jax.custom_vjp op (Warp's grad, say) has reverse mode only.
            why = f"the op is a jax.custom_vjp function: reverse mode only ({describe_error(exc)})"
            rows = case.run(_JVP, lambda: skipped(_JVP, why))
            rows += case.run(_GRAD, lambda: _check_grad(case, problem, primals, tangents, fd_key))
            return rows
        rows = case.run(
            _JVP, lambda: _check_jvp(case, problem, primals, tangents, jvp_out, fd_key, note)
        )
        rows += case.run(_JVP_VMAP, lambda: _check_jvp_vmap(case, problem, primals, tangents))
        transpose = case.run(
            _TRANSPOSE, lambda: _check_transpose(case, problem, primals, tangents, jvp_out, fd_key)
        )
        rows += transpose
        if any(r.status is Status.SKIPPED and r.check == _TRANSPOSE for r in transpose):
            return rows  # no transpose rule: no reverse mode either
        rows += case.run(
            _TRANSPOSE_VMAP, lambda: _check_transpose_vmap(case, problem, primals, jvp_out)
        )
        rows += case.run(_GRAD, lambda: _check_grad(case, problem, primals, tangents, fd_key))
        if fd_key == "float64":
            rows += case.run(_ORDER2, lambda: _check_order2(problem, primals))
        else:
            why = f"second order is checked in float64 only; {note}"
            rows += case.run(_ORDER2, lambda: skipped(_ORDER2, why))
        return rows


_JVP = "autodiff: JVP vs finite differences"
_TRANSPOSE = "autodiff: transpose vs JVP (dot-product test)"
_GRAD = "autodiff: grad of a scalar loss"
_JVP_VMAP = "autodiff: JVP under vmap"
_TRANSPOSE_VMAP = "autodiff: transpose under vmap"
# Rows of the batches the rules are checked on under vmap.
_ROWS = 2


def _stack(rows: Sequence[Sequence[Any]]) -> list[Any]:
    return [jnp.stack(column) for column in zip(*rows, strict=True)]


def _check_jvp_vmap(case: Case, problem, primals, tangents) -> CheckResult:
    # The rules run on batched calls (a batch level of their own): the JVP of
    # the vmapped op against a loop of JVPs, over rows (primals and tangents)
    # that differ.
    rows = [row_inputs(primals, b) for b in range(_ROWS)]
    row_tangents = [[t * (1 + b) for t in tangents] for b in range(_ROWS)]
    loop = _stack([jax.jvp(problem, r, t)[1] for r, t in zip(rows, row_tangents, strict=True)])
    _, got = jax.jvp(jax.vmap(problem), _stack(rows), _stack(row_tangents))
    return case.compare(_JVP_VMAP, loop, list(got), ("loop", "vmap"))


def _check_transpose_vmap(case: Case, problem, primals, jvp_out) -> CheckResult:
    rows = [row_inputs(primals, b) for b in range(_ROWS)]
    cotangents = _random_like(jvp_out, 2)
    row_cts = [tuple(c * (1 + b) for c in cotangents) for b in range(_ROWS)]
    loop = _stack([jax.vjp(problem, *r)[1](c) for r, c in zip(rows, row_cts, strict=True)])
    _, vjp = jax.vjp(jax.vmap(problem), *_stack(rows))
    got = vjp(tuple(_stack(row_cts)))
    return case.compare(_TRANSPOSE_VMAP, loop, list(got), ("loop", "vmap"))


_ORDER2 = "autodiff: second order (check_grads)"


def _only(tangents: Sequence[Any], pos: int) -> list[Any]:
    return [t if k == pos else jnp.zeros_like(t) for k, t in enumerate(tangents)]


def _failed(case: Case, problem: _Problem, pos: int, check: str, detail: str) -> CheckResult:
    # The row naming the input; where the op has several floating-point inputs
    # and the user did not choose them, how to leave this one out.
    which = case.describe_input(problem.diff[pos])
    hint = ""
    if case.options.differentiable is None and len(problem.diff) > 1:
        hint = (
            f"; if the op is not differentiable in {which}, name the inputs it is "
            "differentiable in with `differentiable=`"
        )
    return failed(check, f"{which}: {detail}{hint}")


def _jvp_mismatch(problem, primals, tangents, jvp_out, fd_key) -> str | None:
    eps, rtol = _FD[fd_key]
    plus = problem(*[p + eps * t for p, t in zip(primals, tangents, strict=True)])
    minus = problem(*[p - eps * t for p, t in zip(primals, tangents, strict=True)])
    fd = [(a - b) / (2 * eps) for a, b in zip(plus, minus, strict=True)]
    scale = max([1.0, *(float(jnp.max(jnp.abs(f))) for f in fd if f.size)])
    for k, (f, j) in enumerate(zip(fd, jvp_out, strict=True)):
        close = np.isclose(np.asarray(j), np.asarray(f), rtol=rtol, atol=rtol * scale)
        if not np.all(close):
            index = tuple(int(i) for i in np.argwhere(~close)[0])
            return (
                f"output {problem.outs[k]} at index {index}: finite differences give "
                f"{np.asarray(f)[index].item():.6g}, the JVP rule gives "
                f"{np.asarray(j)[index].item():.6g} (in {fd_key}; rtol={_FD[fd_key][1]:g})"
            )
    return None


def _check_jvp(case, problem, primals, tangents, jvp_out, fd_key, note) -> CheckResult:
    check = _JVP
    problem_text = _jvp_mismatch(problem, primals, tangents, jvp_out, fd_key)
    if problem_text is not None:
        # One input at a time, to name the one whose rule is wrong.
        for pos in range(len(primals)):
            only = _only(tangents, pos)
            _, out = jax.jvp(problem, primals, only)
            alone = _jvp_mismatch(problem, primals, only, out, fd_key)
            if alone is not None:
                return _failed(case, problem, pos, check, alone)
        return failed(check, problem_text)
    return passed(check, "in float64" if fd_key == "float64" else f"in the op's dtypes: {note}")


def _check_transpose(case, problem, primals, tangents, jvp_out, fd_key) -> CheckResult:
    check = _TRANSPOSE
    try:
        _, vjp = jax.vjp(problem, *primals)
        cotangents = _random_like(jvp_out, 2)
        ct = vjp(tuple(cotangents))
    except NotImplementedError as exc:
        return skipped(check, f"the op has no transpose rule ({describe_error(exc)})")
    rtol = _FD[fd_key][0] * 10 if fd_key == "float64" else 1e-3
    # Per input: <J_i v_i, w> = <v_i, J_i^T w>, so a failure names the input.
    for pos in range(len(problem.diff)):
        _, jv = jax.jvp(problem, primals, _only(tangents, pos))
        lhs, rhs = _dot(jv, cotangents), _dot([tangents[pos]], [ct[pos]])
        if abs(lhs - rhs) > rtol * max(1.0, abs(lhs), abs(rhs)):
            where = _first_wrong_cotangent(problem, primals, pos, cotangents, ct[pos])
            detail = f"<J v, w> = {lhs:.6g} but <v, J^T w> = {rhs:.6g}{where}"
            return _failed(case, problem, pos, check, detail)
    return passed(check)


def _first_wrong_cotangent(problem, primals, pos, cotangents, ct) -> str:
    # J^T w built from the JVP column by column, for inputs small enough.
    x = primals[pos]
    if x.size > 4096:
        return ""

    def jv(t):
        tangents = [jnp.zeros_like(p) for p in primals]
        tangents[pos] = t.reshape(x.shape)
        return _dot(jax.jvp(problem, primals, tangents)[1], cotangents)

    basis = jnp.eye(x.size, dtype=x.dtype)
    expected = np.array([jv(basis[k]) for k in range(x.size)]).reshape(x.shape)
    close = np.isclose(
        np.asarray(ct).real,
        expected,
        rtol=1e-3,
        atol=1e-3 * max(1.0, np.abs(expected).max(initial=0)),
    )
    if np.all(close):
        return ""
    index = tuple(int(k) for k in np.argwhere(~close)[0])
    return (
        f"; at index {index} of its cotangent the JVP gives {expected[index]:.6g}, "
        f"the transpose rule {np.asarray(ct)[index].real:.6g}"
    )


def _check_grad(case, problem, primals, tangents, fd_key) -> CheckResult:
    check = _GRAD
    weights = _random_like(problem(*primals), 3)

    def loss(*p):
        return sum(jnp.vdot(w, y).real for w, y in zip(weights, problem(*p), strict=True))

    grads = jax.jit(jax.grad(loss, argnums=tuple(range(len(primals)))))(*primals)
    eps, rtol = _FD[fd_key]

    def mismatch(v: Sequence[Any]) -> str | None:
        lhs = _dot(v, [jnp.conj(g) for g in grads])
        plus = loss(*[p + eps * t for p, t in zip(primals, v, strict=True)])
        minus = loss(*[p - eps * t for p, t in zip(primals, v, strict=True)])
        fd = float((plus - minus) / (2 * eps))
        if abs(lhs - fd) > rtol * max(1.0, abs(fd)):
            return f"<grad, v> = {lhs:.6g}, finite differences give {fd:.6g}"
        return None

    whole = mismatch(tangents)
    if whole is None:
        return passed(check)
    for pos in range(len(primals)):  # name the input whose gradient is wrong
        alone = mismatch(_only(tangents, pos))
        if alone is not None:
            return _failed(case, problem, pos, check, alone)
    return failed(check, whole)


def _check_order2(problem, primals) -> CheckResult:
    check = _ORDER2
    try:
        test_util.check_grads(problem, tuple(primals), order=2, modes=("fwd", "rev"))
    except NotImplementedError as exc:
        return skipped(check, f"a rule cannot be differentiated again ({describe_error(exc)})")
    except AssertionError as exc:
        return failed(check, str(exc).strip().splitlines()[0])
    return passed(check, "forward and reverse, in float64")
