"""Checks of sharding: an op with a sharding rule under a sharded ``jit`` over
the host's CPU devices against the unsharded op (each device computing its
shard, no operand gathered), and inside ``shard_map``.

The sharded ``jit`` and ``shard_map`` rows split one factor: the first
factor of the inputs that an output carries, that the rule does not keep
whole, and whose size a number of devices (two or more) divides; the other
factors are replicated. A rule with reduction factors gets a row splitting the
first of them that divides (each device sums its shard, the partial results
are added across devices); a rule that keeps factors whole
(``need_replication_factors``, or factors of inputs only) gets a row splitting
each of them in turn in the inputs, which the rule must gather back.
"""

from __future__ import annotations

from typing import Any, cast

import jax
import numpy as np
from ffi_core.bridge import check_sharding_rule
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ._case import Case
from ._report import CheckResult, failed, passed, skipped

__all__ = ["check_sharding"]

_JIT = "sharding: sharded jit"
_SHARD_MAP = "sharding: shard_map"
_REDUCTION = "sharding: reduction factor split"
_WHOLE = "sharding: whole factors split in the inputs"


def _count(size: int, devices: int) -> int | None:
    # The most devices (two or more) among which `size` divides.
    return next((c for c in range(min(devices, size), 1, -1) if size % c == 0), None)


def _split(rule: Any, shapes: list[tuple[int, ...]], devices: int) -> tuple[str, int] | None:
    carried = {f for names in rule.outputs for f in names}
    for names, shape in zip(rule.inputs, shapes, strict=True):
        for factor, size in zip(names, shape, strict=True):
            if factor not in carried or factor in rule.whole_factors:
                continue
            count = _count(size, devices)
            if count is not None:
                return factor, count
    return None


def _sizes(rule: Any, shapes: list[tuple[int, ...]]) -> dict[str, int]:
    return {
        f: size
        for names, shape in zip(rule.inputs, shapes, strict=True)
        for f, size in zip(names, shape, strict=True)
    }


def _spec(names: tuple[str, ...], factor: str) -> P:
    return P(*("d" if f == factor else None for f in names))


def check_sharding(case: Case) -> list[CheckResult]:
    """Sharded jit and shard_map against the unsharded op; reduction and whole
    factors split, where the rule has them."""
    rule = check_sharding_rule(case.options.sharding_rule)
    if rule is None:
        why = "the op declares no sharding rule"
        return case.run("sharding", lambda: skipped("sharding", why))
    devices = jax.devices("cpu")
    if len(devices) < 2:
        why = (
            "one CPU device; run with XLA_FLAGS=--xla_force_host_platform_device_count=4 "
            "(set before JAX starts)"
        )
        return case.run("sharding", lambda: skipped("sharding", why))
    shapes = [tuple(np.shape(x)) for x in case.args]
    outs = jax.tree.leaves(jax.eval_shape(case.fn, *case.args))
    try:
        rule = rule.resolve(shapes, [o.shape for o in outs], name="the op")
    except ValueError as exc:
        message = f"the sharding rule does not fit the sample inputs: {exc}"
        return case.run("sharding", lambda: failed("sharding", message))
    special: list[CheckResult] = []
    if rule.reduction_factors:
        special += case.run(_REDUCTION, lambda: _reduction(case, rule, shapes, devices))
    if rule.whole_factors:
        special += case.run(_WHOLE, lambda: _whole(case, rule, shapes, devices))
    split = _split(rule, shapes, len(devices))
    if split is None:
        why = f"no factor of the rule {rule.rule!r} that an output carries divides among devices"
        if not special:
            return case.run("sharding", lambda: skipped("sharding", why))
        return [
            *case.run(_JIT, lambda: skipped(_JIT, why)),
            *case.run(_SHARD_MAP, lambda: skipped(_SHARD_MAP, why)),
            *special,
        ]
    factor, count = split
    mesh = Mesh(np.array(devices[:count]), ("d",))
    # Resolved: its inputs' factors are named (the cast: "elementwise" has them only then).
    specs = [_spec(names, factor) for names in cast("tuple[tuple[str, ...], ...]", rule.inputs)]
    return [
        *case.run(_JIT, lambda: _sharded_jit(case, mesh, specs, factor, count)),
        *case.run(_SHARD_MAP, lambda: _shard_map(case, mesh, specs, rule, factor, count)),
        *special,
    ]


def _run_split(case: Case, rule: Any, factor: str, mesh: Mesh) -> tuple[Any, str]:
    # The op under a sharded jit with `factor` split along "d" in the inputs:
    # its outputs, and the compiled program's text.
    inputs = [
        jax.device_put(x, NamedSharding(mesh, _spec(names, factor)))
        for x, names in zip(case.args, rule.inputs, strict=True)
    ]
    jitted = jax.jit(case.fn)
    got = jax.block_until_ready(jitted(*inputs))
    return got, jitted.lower(*inputs).compile().as_text() or ""


def _reduction(case: Case, rule: Any, shapes: list[tuple[int, ...]], devices: list[Any]):
    sizes = _sizes(rule, shapes)
    for factor in rule.reduction_factors:
        count = _count(sizes[factor], len(devices))
        if count is None:
            continue
        mesh = Mesh(np.array(devices[:count]), ("d",))
        got, text = _run_split(case, rule, factor, mesh)
        row = case.compare(_REDUCTION, case.expected, got, ("one device", f"{factor!r} split"))
        if row.detail:
            return row
        if "all-gather" in text:
            return failed(
                _REDUCTION,
                f"the compiled program gathers an operand (all-gather) split along reduction "
                f"factor {factor!r}: the rule was not used",
            )
        return passed(
            _REDUCTION,
            f"{factor!r} split over {count} devices, the partial results summed",
        )
    sizes_text = ", ".join(f"{f!r} of size {sizes[f]}" for f in rule.reduction_factors)
    return skipped(_REDUCTION, f"no reduction factor divides among devices ({sizes_text})")


def _whole(case: Case, rule: Any, shapes: list[tuple[int, ...]], devices: list[Any]):
    sizes = _sizes(rule, shapes)
    done = []
    for factor in rule.whole_factors:
        count = _count(sizes.get(factor, 0), len(devices))
        if count is None:
            continue
        mesh = Mesh(np.array(devices[:count]), ("d",))
        got, _ = _run_split(case, rule, factor, mesh)
        names = ("one device", f"{factor!r} split in the inputs")
        row = case.compare(_WHOLE, case.expected, got, names)
        if row.detail:
            return failed(_WHOLE, f"{factor!r} kept whole: {row.detail}")
        done.append(factor)
    if not done:
        why = "no factor the rule keeps whole appears in an input with a size that divides"
        return skipped(_WHOLE, why)
    return passed(_WHOLE, f"{', '.join(map(repr, done))} gathered by the rule, results agree")


def _sharded_jit(case: Case, mesh: Mesh, specs: list[P], factor: str, count: int) -> CheckResult:
    inputs = [
        jax.device_put(x, NamedSharding(mesh, s)) for x, s in zip(case.args, specs, strict=True)
    ]
    jitted = jax.jit(case.fn)
    got = jax.block_until_ready(jitted(*inputs))
    row = case.compare(_JIT, case.expected, got, ("one device", "sharded"))
    if row.detail:
        return row
    if "all-gather" in (jitted.lower(*inputs).compile().as_text() or ""):
        return failed(
            _JIT,
            f"the compiled program gathers an operand (all-gather) split along {factor!r}: "
            "the rule was not used",
        )
    first = jax.tree.leaves(got)[0]
    local = int(first.addressable_shards[0].data.size)
    detail = f"{factor!r} split over {count} devices; device 0 computed {local} of {first.size}"
    return passed(_JIT, detail)


def _shard_map(
    case: Case, mesh: Mesh, specs: list[P], rule: Any, factor: str, count: int
) -> CheckResult:
    out_specs = tuple(_spec(names, factor) for names in rule.outputs)
    tree = jax.tree.structure(case.expected)

    def flat(*args: Any) -> tuple[Any, ...]:
        return tuple(jax.tree.leaves(case.fn(*args)))

    mapped = jax.shard_map(flat, mesh=mesh, in_specs=tuple(specs), out_specs=out_specs)
    got = jax.tree.unflatten(tree, jax.block_until_ready(jax.jit(mapped)(*case.args)))
    row = case.compare(_SHARD_MAP, case.expected, got, ("one device", "shard_map"))
    return row if row.detail else passed(_SHARD_MAP, f"{factor!r} split over {count} devices")
