"""Checks of sharding: an op with a sharding rule under a sharded ``jit`` over
the host's CPU devices against the unsharded op (each device computing its
shard, no operand gathered), and inside ``shard_map``.

One factor is split: the first factor of the inputs that an output carries,
that the rule does not keep whole, and whose size a number of devices (two or
more) divides; the other factors are replicated.
"""

from __future__ import annotations

from typing import Any, cast

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .._sharding_rule import check_sharding_rule
from ._case import Case
from ._report import CheckResult, failed, passed, skipped

__all__ = ["check_sharding"]

_JIT = "sharding: sharded jit"
_SHARD_MAP = "sharding: shard_map"


def _split(rule: Any, shapes: list[tuple[int, ...]], devices: int) -> tuple[str, int] | None:
    carried = {f for names in rule.outputs for f in names}
    for names, shape in zip(rule.inputs, shapes, strict=True):
        for factor, size in zip(names, shape, strict=True):
            if factor not in carried or factor in rule.whole_factors:
                continue
            for count in range(min(devices, size), 1, -1):
                if size % count == 0:
                    return factor, count
    return None


def _spec(names: tuple[str, ...], factor: str) -> P:
    return P(*("d" if f == factor else None for f in names))


def check_sharding(case: Case) -> list[CheckResult]:
    """Sharded jit and shard_map against the unsharded op."""
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
    split = _split(rule, shapes, len(devices))
    if split is None:
        why = f"no factor of the rule {rule.rule!r} that an output carries divides among devices"
        return case.run("sharding", lambda: skipped("sharding", why))
    factor, count = split
    mesh = Mesh(np.array(devices[:count]), ("d",))
    # Resolved: its inputs' factors are named (the cast: "elementwise" has them only then).
    specs = [_spec(names, factor) for names in cast("tuple[tuple[str, ...], ...]", rule.inputs)]
    return [
        *case.run(_JIT, lambda: _sharded_jit(case, mesh, specs, factor, count)),
        *case.run(_SHARD_MAP, lambda: _shard_map(case, mesh, specs, rule, factor, count)),
    ]


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
