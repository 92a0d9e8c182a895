"""One case of a kernel under a sharded ``jit`` over a mesh of CPU devices:
how long it takes and how much of the work each device did.

A kernel with a sharding rule (``XLACustomKernel.def_sharding_rule``) runs on
each device's shard. The first factor of the inputs that an output carries
(so the rule splits it) and that the devices divide is split over a one-axis
mesh of ``devices`` CPU devices, in every input that has it; the rest is
replicated. The call is timed on one
device and on the mesh, and the first output's shard on the first device
says how many of its elements that device computed.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ._config import BenchmarkConfig
from ._timing import benchmark_function

__all__ = ["ShardedRun", "run_sharded"]


@dataclasses.dataclass(frozen=True)
class ShardedRun:
    """One case timed on one device and on ``devices`` devices.

    Attributes:
        label: ``"<kernel>/<case>"``.
        backend: the backend that ran.
        devices: the size of the mesh.
        one_device_ms, sharded_ms: mean time per call.
        elements, elements_per_device: of the first output, in all and on the
            first device.
        gathered: whether the compiled program gathers an operand (all-gather).
    """

    label: str
    backend: str
    devices: int
    one_device_ms: float
    sharded_ms: float
    elements: int
    elements_per_device: int
    gathered: bool

    def row(self) -> list[str]:
        share = self.elements_per_device / self.elements if self.elements else 1.0
        return [
            self.label,
            self.backend,
            f"{self.one_device_ms:.3f}",
            f"{self.sharded_ms:.3f}",
            f"{self.elements_per_device} of {self.elements} ({share:.0%})",
            "yes" if self.gathered else "no",
        ]


#: The header of ``ShardedRun.row``.
HEADER = ["case", "backend", "1 device ms", "sharded ms", "elements per device", "all-gather"]


def _split_factor(rule: Any, shapes: list[tuple[int, ...]], devices: int) -> str | None:
    # The first factor of the inputs that an output carries (so the rule splits
    # it) and whose size the devices divide.
    carried = {f for names in rule.outputs for f in names}
    for names, shape in zip(rule.inputs, shapes, strict=True):
        for factor, size in zip(names, shape, strict=True):
            if factor in carried and size % devices == 0:
                return factor
    return None


def _spec(names: tuple[str, ...], factor: str | None) -> P:
    return P(*("d" if f == factor else None for f in names))


def run_sharded(
    kernel: Any,
    cfg: BenchmarkConfig,
    backend: str,
    devices: int,
    *,
    n_warmup: int,
    n_runs: int,
) -> ShardedRun:
    """Time ``cfg`` of ``kernel`` (which has a sharding rule) on one CPU device
    and sharded over the first ``devices`` CPU devices."""
    fn = jax.jit(functools.partial(kernel.call, backend=backend, **cfg.kernel_kwargs))
    cpus = jax.devices("cpu")[:devices]
    outs = jax.tree.leaves(jax.eval_shape(fn, *cfg.args))
    rule = kernel.sharding_rule.resolve(
        [np.shape(x) for x in cfg.args], [o.shape for o in outs], name=f"kernel {kernel.name!r}"
    )
    mesh = Mesh(np.array(cpus), ("d",))
    factor = _split_factor(rule, [np.shape(x) for x in cfg.args], devices)
    sharded = [
        jax.device_put(x, NamedSharding(mesh, _spec(names, factor)))
        for x, names in zip(cfg.args, rule.inputs, strict=True)
    ]
    local = [jax.device_put(x, cpus[0]) for x in cfg.args]
    one = benchmark_function(fn, n_warmup=n_warmup, n_runs=n_runs, data=local)
    many = benchmark_function(fn, n_warmup=n_warmup, n_runs=n_runs, data=sharded)
    first = jax.tree.leaves(many.output)[0]
    return ShardedRun(
        label=f"{kernel.name}/{cfg.name}",
        backend=backend,
        devices=devices,
        one_device_ms=one.mean_ms,
        sharded_ms=many.mean_ms,
        elements=int(first.size),
        elements_per_device=int(first.addressable_shards[0].data.size),
        gathered="all-gather" in (fn.lower(*sharded).compile().as_text() or ""),
    )
