"""Checks of compilation and registration, by counting: a second call with the
same shapes neither compiles nor registers an FFI target again, and a call
with new sizes of the same dtypes and ranks (``other_args``, called with
``other_kwargs`` where given) registers nothing new (bridges read sizes at run
time, so one registration serves every shape)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from ffi_core.bridge import registered_targets

from ._case import Case
from ._report import CheckResult, failed, passed, skipped

__all__ = ["check_compile"]


def _signature(args: Sequence[Any]) -> list[tuple[str, int]]:
    return [(np.dtype(x.dtype).name, np.ndim(x)) for x in args]


def check_compile(case: Case) -> list[CheckResult]:
    """Count compilations and FFI registrations over repeated calls."""
    return [
        *case.run("compile: same shapes twice", lambda: _same_shapes(case)),
        *case.run("compile: new shape", lambda: _new_shape(case)),
    ]


def _counted(case: Case) -> tuple[Any, list[int]]:
    calls = [0]

    def counted(*args: Any) -> Any:
        calls[0] += 1  # runs when jit traces, not when it reuses a compiled call
        return case.fn(*args)

    return jax.jit(counted), calls


def _new_targets(before: set[tuple[str, str]]) -> list[str]:
    return sorted(name for name, _ in set(registered_targets()) - before)


def _same_shapes(case: Case) -> CheckResult:
    check = "compile: same shapes twice"
    jitted, calls = _counted(case)
    jax.block_until_ready(jitted(*case.args))
    before = set(registered_targets())
    jax.block_until_ready(jitted(*case.args))
    new = _new_targets(before)
    if calls[0] != 1:
        return failed(check, f"the second call traced the op again ({calls[0]} traces)")
    if new:
        return failed(check, f"the second call registered FFI targets again: {new}")
    return passed(check, "traced and compiled once, no new FFI target")


def _new_shape(case: Case) -> CheckResult:
    check = "compile: new shape"
    other = case.options.other_args
    if other is None:
        return skipped(check, "no `other_args` given (the inputs in other sizes)")
    if _signature(other) != _signature(case.args):
        why = "`other_args` differ in dtypes or ranks: a new registration is expected"
        return skipped(check, why)
    jitted, _ = _counted(case)
    jax.block_until_ready(jitted(*case.args))
    before = set(registered_targets())
    other_kwargs = case.options.other_kwargs
    if other_kwargs is not None:  # keywords that follow the new sizes
        op = case.options.signature_of
        jitted = jax.jit(lambda *args: op(*args, **other_kwargs))
    jax.block_until_ready(jitted(*other))
    new = _new_targets(before)
    if new:
        return failed(check, f"inputs of new sizes registered new FFI targets: {new}")
    return passed(check, "the FFI targets registered for the first shape served")
