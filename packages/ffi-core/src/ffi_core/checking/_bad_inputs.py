"""Checks of bad inputs: a wrong dtype, rank and number of inputs each raise
a TypeError or ValueError whose message names the input, never anything else
and never a wrong result.

The op is traced, lowered and compiled with the bad inputs, never run: its
checks belong before anything runs, and a kernel that does not check bounds
would write past a buffer (and may crash the process) if it ran."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._spec import array_sig
from ._case import Case, describe_error, param_names
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
        cause = _clear_cause(exc)
        if cause is None:
            return failed(
                check, f"{what} raised {describe_error(exc)}, not a TypeError or ValueError"
            )
        message = describe_error(cause)
        if index is not None and not _names(message, index, param, bad):
            which = f"input {index}" + (f" (`{param}`)" if param else "")
            return failed(check, f"{what}: the message does not name {which}: {message}")
        return passed(check, f"{what}: {message}")
    hint = (
        f"; for an op meant to take it, leave this row out with skip=[{check!r}]"
        if check == "bad_inputs: dtype"
        else ""
    )
    return failed(check, f"{what} was accepted without an error{hint}")


def _compiled(fn: Callable[..., Any], *args: Any) -> Any:
    return jax.jit(fn).trace(*args).lower().compile()


def _other_dtype(dtype: np.dtype) -> np.dtype:
    if dtype.kind in "fc":
        return np.dtype(np.int32)
    return np.dtype(np.float32)


def check_bad_inputs(case: Case) -> list[CheckResult]:
    """A wrong dtype and rank of the first input, one input too few and too many."""
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
            lambda: _expect_error(
                "bad_inputs: dtype",
                f"input 0 as {bad.dtype.name}",
                lambda: _compiled(case.fn, bad, *args[1:]),
                0,
                param,
                array_sig(bad).dtype,
            ),
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
