"""Checks of aliases and donation: under ``jit`` with the aliased input donated
the output reuses its buffer, and the caller's other inputs are untouched;
without donation no input changes at all."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jex_core

from ._case import Case
from ._report import CheckResult, failed, passed, skipped

__all__ = ["check_aliases", "declared_aliases"]

# The parameters in which primitives declare {input: output} aliases: the
# bridges' (``aliases``) and jax.ffi.ffi_call's.
_PARAMS = ("aliases", "input_output_aliases")


def _pairs(value: Any) -> list[tuple[int, int]]:
    if isinstance(value, Mapping):
        return [(int(i), int(j)) for i, j in value.items()]
    if isinstance(value, Sequence):
        return [(int(i), int(j)) for i, j in value]
    return []


def declared_aliases(case: Case) -> dict[int, int]:
    """``{input: output}`` of the op, from the calls in its jaxpr that declare
    aliases and take the op's inputs and give its outputs directly."""
    closed = jax.make_jaxpr(case.fn)(*case.args)
    jaxpr = closed.jaxpr
    inputs = {v: k for k, v in enumerate(jaxpr.invars)}
    outputs = {v: k for k, v in enumerate(jaxpr.outvars) if not isinstance(v, jex_core.Literal)}
    found: dict[int, int] = {}
    for eqn in jaxpr.eqns:
        for name in _PARAMS:
            for i, j in _pairs(eqn.params.get(name, ())):
                source, result = eqn.invars[i], eqn.outvars[j]
                if source in inputs and result in outputs:
                    found[inputs[source]] = outputs[result]
    return found


def _copies(args: Sequence[Any]) -> list[jax.Array]:
    return [jnp.array(x, copy=True) for x in args]


def _changed(before: Sequence[Any], after: Sequence[jax.Array], skip: int | None) -> str | None:
    for k, (b, a) in enumerate(zip(before, after, strict=True)):
        if k == skip:
            continue
        if isinstance(a, jax.Array) and a.is_deleted():
            return f"input {k} was deleted, though it was not donated"
        old, new = np.asarray(b), np.asarray(a)
        if not np.array_equal(old, new, equal_nan=old.dtype.kind in "fc"):
            index = tuple(int(i) for i in np.argwhere(old != new)[0])
            return f"input {k} changed at index {index}: {old[index].item()!r} -> {new[index].item()!r}"
    return None


def check_aliases(case: Case) -> list[CheckResult]:
    """Inputs untouched by a jitted call; each alias reuses its buffer under donation."""
    rows = case.run("aliases: inputs untouched", lambda: _untouched(case))
    aliases = dict(case.options.aliases) if case.options.aliases is not None else None
    if aliases is None:
        aliases = declared_aliases(case)
    if not aliases:
        why = "the op declares no input_output_aliases"
        return rows + case.run("aliases: donation", lambda: skipped("aliases: donation", why))
    for i, j in sorted(aliases.items()):
        check = f"aliases: output {j} reuses donated input {i}"
        rows += case.run(check, functools.partial(_donated, case, i, j, check))
    return rows


def _untouched(case: Case) -> CheckResult:
    check = "aliases: inputs untouched"
    problem = _changed(case.originals, case.args, None)
    if problem:
        return failed(check, f"an eager call changed its inputs: {problem}")
    inputs = _copies(case.originals)
    jax.block_until_ready(jax.jit(case.fn)(*inputs))
    problem = _changed(case.originals, inputs, None)
    return (
        failed(check, f"a call without donation changed its inputs: {problem}")
        if problem
        else passed(check)
    )


def _donated(case: Case, i: int, j: int, check: str) -> CheckResult:
    inputs = _copies(case.originals)
    address = inputs[i].unsafe_buffer_pointer()
    out = jax.block_until_ready(jax.jit(case.fn, donate_argnums=(i,))(*inputs))
    leaves = jax.tree.leaves(out)
    row = case.compare(check, case.expected, out, ("without donation", "with donation"))
    if row.detail:
        return row
    if leaves[j].unsafe_buffer_pointer() != address:
        return failed(check, f"output {j} got a new buffer; donated input {i} was copied")
    problem = _changed(case.originals, inputs, i)
    if problem:
        return failed(check, problem)
    return passed(check, "the same buffer, other inputs untouched")
