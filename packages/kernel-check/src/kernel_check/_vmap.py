"""Checks of ``jax.vmap``: the batched op against a Python loop over the batch,
with the batch axis first and elsewhere, batched and unbatched inputs mixed,
nested, for every ``vmap_method`` asked for and every backend.

The rows of a batch differ (see ``row_inputs``), so a batching rule that mixes
them, or a kernel that writes past its row, gives a wrong row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
from jax.extend import core as jex_core

from ._case import Case, row_inputs, stack_rows
from ._report import CheckResult, skipped

__all__ = ["check_vmap", "with_vmap_method"]


def _loop(fn: Callable[..., Any], rows: Sequence[Sequence[Any]]) -> Any:
    # The reference: one call per row, results stacked along a new axis 0.
    outs = [jax.block_until_ready(fn(*r)) for r in rows]
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *outs)


def _batched_rows(args: Sequence[Any], size: int, batched: Sequence[bool]) -> list[list[Any]]:
    return [
        [x if not b else r for x, b, r in zip(args, batched, row_inputs(args, k), strict=True)]
        for k in range(size)
    ]


def _case_rows(
    case: Case, fn: Callable[..., Any], label: str, size: int, *, all_cases: bool = True
) -> list[CheckResult]:
    args = case.args
    n = len(args)

    def axis0() -> CheckResult:
        expected = _loop(fn, _batched_rows(args, size, [True] * n))
        got = jax.jit(jax.vmap(fn))(*stack_rows(args, size))
        return case.compare(f"vmap: {label}batch axis 0", expected, got, ("loop", "vmap"))

    def axis_last() -> CheckResult:
        # The batch axis last in every input (first where it is a scalar).
        expected = _loop(fn, _batched_rows(args, size, [True] * n))
        axes = [x.ndim for x in map(jnp.asarray, args)]
        moved = [jnp.moveaxis(s, 0, a) for s, a in zip(stack_rows(args, size), axes, strict=True)]
        got = jax.jit(jax.vmap(fn, in_axes=axes))(*moved)
        return case.compare(f"vmap: {label}batch axis last", expected, got, ("loop", "vmap"))

    def mixed() -> CheckResult:
        # Every other input batched, the rest shared by every row.
        mask = [i % 2 == 0 for i in range(n)]
        expected = _loop(fn, _batched_rows(args, size, mask))
        inputs = [s if m else x for s, x, m in zip(stack_rows(args, size), args, mask, strict=True)]
        got = jax.jit(jax.vmap(fn, in_axes=[0 if m else None for m in mask]))(*inputs)
        check = f"vmap: {label}batched and unbatched inputs"
        return case.compare(check, expected, got, ("loop", "vmap"))

    def nested() -> CheckResult:
        # vmap of vmap, the outer batch on axis 1: rows (outer, inner) of a
        # (2, size) grid, each its own row of the loop.
        grid = stack_rows(args, 2 * size)
        inputs = [jnp.swapaxes(g.reshape(2, size, *g.shape[1:]), 0, 1) for g in grid]
        got = jax.jit(jax.vmap(jax.vmap(fn), in_axes=1))(*inputs)
        flat = _loop(fn, _batched_rows(args, 2 * size, [True] * n))
        expected = jax.tree.map(lambda e: e.reshape(2, size, *e.shape[1:]), flat)
        return case.compare(f"vmap: {label}nested", expected, got, ("loop", "vmap"))

    rows = case.run(f"vmap: {label}batch axis 0", axis0)
    if all_cases:
        rows += case.run(f"vmap: {label}batch axis last", axis_last)
        if n > 1:
            rows += case.run(f"vmap: {label}batched and unbatched inputs", mixed)
        rows += case.run(f"vmap: {label}nested", nested)
    return rows


def _has_param(jaxpr: Any, name: str) -> bool:
    if any(name in eqn.params for eqn in jaxpr.eqns):
        return True
    return any(_has_param(sub, name) for sub in jex_core.subjaxprs(jaxpr))


# Values a primitive refuses for the parameter: jax.ffi.ffi_call has no
# vmap_method None (it means "cannot be batched" there, not a native loop).
_REFUSED = {("ffi_call", "vmap_method"): (None,)}


def _rewrite(jaxpr: Any, name: str, value: Any) -> Any:
    eqns = []
    for eqn in jaxpr.eqns:
        params = {k: _rewrite_param(v, name, value) for k, v in eqn.params.items()}
        if name in params and value not in _REFUSED.get((eqn.primitive.name, name), ()):
            params[name] = value
        eqns.append(eqn.replace(params=params))
    return jaxpr.replace(eqns=eqns)


def _rewrite_param(v: Any, name: str, value: Any) -> Any:
    if isinstance(v, jex_core.ClosedJaxpr):
        return v.replace(jaxpr=_rewrite(v.jaxpr, name, value))
    if isinstance(v, jex_core.Jaxpr):
        return _rewrite(v, name, value)
    if isinstance(v, tuple) and v and all(isinstance(e, jex_core.ClosedJaxpr) for e in v):
        return tuple(_rewrite_param(e, name, value) for e in v)
    return v


def with_vmap_method(
    fn: Callable[..., Any], args: Sequence[Any], method: str | None
) -> Callable[..., Any] | None:
    """``fn`` with every bridge call in it made with ``vmap_method=method``,
    or None when ``fn`` makes no call that has a ``vmap_method``.

    The calls are found in the jaxpr of ``fn`` on ``args`` (so the result
    takes inputs of those shapes only) and their parameter replaced: the
    kernels stay the ones ``fn`` calls."""
    closed, shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    if not _has_param(closed.jaxpr, "vmap_method"):
        return None
    new = closed.replace(jaxpr=_rewrite(closed.jaxpr, "vmap_method", method))
    run = jex_core.jaxpr_as_fun(new)
    tree = jax.tree.structure(shape)

    def rebuilt(*inputs: Any) -> Any:
        return jax.tree.unflatten(tree, run(*inputs))

    return rebuilt


def check_vmap(case: Case) -> list[CheckResult]:
    """The op, each ``vmap_method`` and each backend against a loop."""
    size = case.options.batch_size
    rows = _case_rows(case, case.fn, "", size)
    methods = case.options.vmap_methods
    if with_vmap_method(case.fn, case.args, None) is None:
        if methods is not None:
            why = "the op makes no call that has a vmap_method"
            rows += case.run("vmap: vmap_method", lambda: skipped("vmap: vmap_method", why))
    else:
        for method in methods if methods is not None else _DEFAULT_METHODS:
            # Not None: the op makes a call that has a vmap_method (checked above).
            variant = cast("Callable[..., Any]", with_vmap_method(case.fn, case.args, method))
            label = f"vmap_method={method!r}, "
            rows += _case_rows(case, variant, label, size, all_cases=False)
    for name, fn in case.variants.items():
        rows += _case_rows(case, fn, f"{name}, ", size, all_cases=False)
    return rows


# The methods that keep the kernel's view of one call unchanged, so they are
# right for every kernel: the native loop (None) and an XLA loop.
_DEFAULT_METHODS: tuple[str | None, ...] = (None, "sequential")
