"""Checks of bad inputs: a wrong rank and number of inputs each raise a
TypeError or ValueError whose message names the input, never anything else;
an input of another dtype is either refused so, or gives the right result.

With a wrong rank or number of inputs the op is traced, lowered and compiled,
never run: its checks belong before anything runs, and a kernel that does not
check bounds would write past a buffer (and may crash the process) if it ran.
With another dtype the shapes are the op's own, so an op that accepts it is
run, and its results are compared with the op's on the same values in the
declared dtype: a kernel that compiles for any dtype its code takes (numba's)
passes where its results are right."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from ffi_core.bridge import array_sig

from ._case import Case, describe_error, param_names
from ._compare import first_difference
from ._report import CheckResult, failed, passed, skipped

__all__ = ["check_bad_inputs"]

# Exceptions that are the op's clear refusal of an input.
_CLEAR = (TypeError, ValueError)


def _clear_cause(exc: BaseException) -> BaseException | None:
    # A TypeError/ValueError itself, or one a framework wrapped (a backend
    # error raised at lowering keeps the bridge's error as its cause).
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, _CLEAR):
            return seen
        seen = seen.__cause__
    return None


def _names(message: str, index: int, param: str | None, bad: str | None) -> bool:
    # The input by position, by parameter name, or by what it is: a message
    # that says which signature it refuses ("inputs (float32[2d])") names it.
    words = [f"input {index}", f"argument {index}", f"operand {index}", f"inputs[{index}]"]
    if bad is not None:
        words.append(bad)
    if param is not None:
        words.append(f"`{param}`")
        words.append(f"'{param}'")
    low = message.lower()
    return any(w.lower() in low for w in words)


def _expect_error(
    check: str,
    what: str,
    call: Callable[[], Any],
    index: int | None = None,
    param: str | None = None,
    bad: str | None = None,
) -> CheckResult:
    try:
        call()
    except Exception as exc:
        return _refusal(check, what, exc, index, param, bad)
    return failed(check, f"{what} was accepted without an error")


def _refusal(
    check: str,
    what: str,
    exc: Exception,
    index: int | None = None,
    param: str | None = None,
    bad: str | None = None,
) -> CheckResult:
    # A refusal passes when it is clear: a TypeError or ValueError (or one a
    # framework wrapped) naming the input, where one input is at fault.
    cause = _clear_cause(exc)
    if cause is None:
        return failed(check, f"{what} raised {describe_error(exc)}, not a TypeError or ValueError")
    message = describe_error(cause)
    if index is not None and not _names(message, index, param, bad):
        which = f"input {index}" + (f" (`{param}`)" if param else "")
        return failed(check, f"{what}: the message does not name {which}: {message}")
    return passed(check, f"{what}: {message}")


def _in_dtypes(got: Any, want: Any) -> list[np.ndarray]:
    # The expected results in the dtypes the op gave: an op whose outputs
    # follow its inputs' dtype (int32 in, int32 out) is right when its values
    # are the declared dtype's converted as NumPy converts them.
    with np.errstate(invalid="ignore", over="ignore"):
        return [
            np.asarray(w).astype(np.asarray(g).dtype)
            for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=False)
        ]


def _other_dtype_row(case: Case, check: str, bad: Any, param: str | None) -> CheckResult:
    args = case.args
    declared = np.dtype(jnp.asarray(args[0]).dtype)
    what = f"input 0 as {bad.dtype.name}"
    try:
        got = jax.block_until_ready(jax.jit(case.fn)(bad, *args[1:]))
    except Exception as exc:
        return _refusal(check, what, exc, 0, param, array_sig(bad).dtype)
    same = bad.astype(declared)  # the same values, in the declared dtype
    want = jax.block_until_ready(jax.jit(case.fn)(same, *args[1:]))
    if len(jax.tree.leaves(got)) != len(jax.tree.leaves(want)):
        return failed(check, f"{what} was accepted and gave another number of outputs")
    problem = first_difference(
        _in_dtypes(got, want),
        [np.asarray(g) for g in jax.tree.leaves(got)],
        tolerances=case.options.tolerances,
        names=(f"with {declared.name}", f"with {bad.dtype.name}"),
    )
    if problem is not None:
        return failed(
            check,
            f"{what} was accepted and gave a wrong result ({problem}); refuse the dtype "
            "with a TypeError naming the input, or compute it right",
        )
    return passed(check, f"{what} accepted: the op's results on the same values as {declared.name}")


def _compiled(fn: Callable[..., Any], *args: Any) -> Any:
    return jax.jit(fn).trace(*args).lower().compile()


def _other_dtype(dtype: np.dtype) -> np.dtype:
    if dtype.kind in "fc":
        return np.dtype(np.int32)
    return np.dtype(np.float32)


def check_bad_inputs(case: Case) -> list[CheckResult]:
    """Another dtype and a wrong rank of the first input, one input too few and too many."""
    args: Sequence[Any] = case.args
    if not args:
        return case.run("bad_inputs", lambda: skipped("bad_inputs", "the op takes no inputs"))
    names = param_names(case.options.signature_of)
    param = names[0] if names else None
    x = jnp.asarray(args[0])
    bad = x.astype(_other_dtype(np.dtype(x.dtype)))
    higher = x[None]
    n = len(args)
    return [
        *case.run(
            "bad_inputs: dtype",
            lambda: _other_dtype_row(case, "bad_inputs: dtype", bad, param),
        ),
        *case.run(
            "bad_inputs: rank",
            lambda: _expect_error(
                "bad_inputs: rank",
                f"input 0 with rank {higher.ndim}",
                lambda: _compiled(case.fn, higher, *args[1:]),
                0,
                param,
                str(array_sig(higher)),
            ),
        ),
        *case.run(
            "bad_inputs: one input too few",
            lambda: _expect_error(
                "bad_inputs: one input too few",
                f"{n - 1} inputs",
                lambda: _compiled(case.fn, *args[:-1]),
            ),
        ),
        *case.run(
            "bad_inputs: one input too many",
            lambda: _expect_error(
                "bad_inputs: one input too many",
                f"{n + 1} inputs",
                lambda: _compiled(case.fn, *args, args[-1]),
            ),
        ),
    ]
