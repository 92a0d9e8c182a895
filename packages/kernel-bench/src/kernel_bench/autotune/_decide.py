"""Where a decision comes from: memory, process 0, the disk, a measurement.

The settings of the autotuner (the time budget), its counts, and :class:`AutotuneChooser`, the chooser kernel-bench registers
into xla-custom-kernel for backend ``"auto"``. See ``kernel_bench.autotune``
for the order in which a decision is looked for and the rule that re-measures
decisions that were not settled.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Collection
from typing import Any

import jax
from xla_custom_kernel import CallSite

from .._kernel import benchmark_kernel
from .._load import known as load_known
from .._observed import observe
from . import _cache, _distributed, _measure
from ._decision import Decision

__all__ = [
    "DEFAULT_BUDGET_S",
    "AutotuneChooser",
    "clear",
    "decide_site",
    "forget",
    "get_budget",
    "set_budget",
    "stats",
]

#: Seconds of timing a new decision may take by default (compiling each
#: backend's program once comes on top).
DEFAULT_BUDGET_S = 0.2

_lock = threading.RLock()
_budget_s = DEFAULT_BUDGET_S
# Decisions made or read in this process, by the call site's lookup key
# (hashable avals and static values: no digest to compute).
_memory: dict[tuple[Any, ...], Decision] = {}
# "remeasured": decisions read from the disk that were not settled and were
# measured again (counted in "measured" too).
_stats = {
    "measured": 0,
    "remeasured": 0,
    "memory": 0,
    "disk": 0,
    "process 0": 0,
    "fallback": 0,
}


def set_budget(seconds: float) -> None:
    """Seconds of timing one new decision may take (default :data:`DEFAULT_BUDGET_S`).

    At least three rounds run even where one call takes longer.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"`seconds` must be a positive number, got {seconds!r}")
    global _budget_s
    _budget_s = float(seconds)


def get_budget() -> float:
    """The time budget of a new decision, in seconds."""
    return _budget_s


def stats() -> dict[str, int]:
    """How many decisions this process measured (and of those, how many
    re-measured a decision read from the disk that was not settled), and how
    many it took from memory, the disk, process 0 or the fallback."""
    with _lock:
        return dict(_stats)


def clear(op: str | None = None) -> int:
    """Forget the decisions of operation ``op`` (all when None), on disk and in
    this process; returns how many were removed from the disk. Functions
    already compiled keep their backends: JAX's caches are cleared so that the
    next call of a jitted function decides again."""
    with _lock:
        removed = _cache.remove(op)
        for key in [k for k, d in _memory.items() if op is None or d.op == op]:
            del _memory[key]
    jax.clear_caches()
    return removed


def forget(platform: str, keys: Collection[str]) -> int:
    """Forget the decisions of ``keys`` on ``platform`` (``Decision.key``), on this
    machine's disk file and in this process, so that the next call site of
    each is measured again; returns how many the disk held. Functions already
    compiled keep their backends."""
    with _lock:
        for lookup in [k for k, d in _memory.items() if d.platform == platform and d.key in keys]:
            del _memory[lookup]
        return _cache.remove_keys(platform, keys)


# ------------------------------------------------------------------ deciding


def decide_site(site: CallSite) -> Decision:
    """The decision for the call site ``site``, from memory or made now."""
    with _lock:
        decision = _memory.get(site.lookup_key)
        if decision is not None:
            _stats["memory"] += 1
        else:
            decision = _decide(site)
            # Passed over as candidates: the call site's, whatever the source.
            unavailable = dict(site.unavailable)
            if unavailable:
                decision = dataclasses.replace(decision, unavailable=unavailable)
            _memory[site.lookup_key] = decision
        observe(decision)
    return decision


def _fallback(site: CallSite, reason: str) -> Decision:
    _stats["fallback"] += 1
    return _measure.fallback(site, reason)


def _decide(site: CallSite) -> Decision:
    if len(site.backends) == 1:
        return Decision(
            site.op,
            site.platform,
            site.describe(),
            site.key,
            site.backends[0],
            source="only backend",
        )
    store = _distributed.client()
    if store is None:
        return _local(site)
    decision, from_process_0 = _distributed.shared(
        store, site, lambda: _local(site), lambda reason: _fallback(site, reason)
    )
    if from_process_0:
        _stats["process 0"] += 1
    return decision


def _local(site: CallSite) -> Decision:
    try:
        device = jax.devices(site.platform)[0]
    except RuntimeError:
        return _fallback(site, f"no {site.platform} device in this process to measure on")
    found = _cache.from_disk(site.platform, site.key, site.op, site.backends)
    if found is not None and found.settled and not _load_unrecorded(found):
        _stats["disk"] += 1
        return found
    # Not on disk, or not settled there (within its noise, or measured while
    # the machine was busy), or measured without the load where this machine
    # measures it (a busy machine could have passed for a quiet one): measured
    # now, once in this process (the memory answers from now on), and the
    # disk updated.
    decision = _measure.measure(site, device, get_budget())
    if decision.source == "fallback":
        _stats["fallback"] += 1
        return decision
    _stats["measured"] += 1
    if found is not None:
        _stats["remeasured"] += 1
    # A static value written with a memory address makes a key no later
    # process computes again: such decisions stay in this process.
    if site.unstable_static() is None:
        _cache.to_disk(site.platform, decision)
    return decision


def _load_unrecorded(decision: Decision) -> bool:
    # A measured decision without the load of other processes, read on a
    # machine that measures it: written before the load was recorded (the
    # disk's file is this machine's), so whether it was busy is unknown.
    return decision.noise is not None and decision.load is None and load_known()


class AutotuneChooser:
    """kernel-bench's chooser of backend ``"auto"`` (an
    ``xla_custom_kernel.Chooser``): the backend measured fastest per call
    signature, kept on disk; it also serves ``XLACustomKernel.explain`` and
    ``XLACustomKernel.benchmark``."""

    def choose(self, site: CallSite) -> str:
        """The backend of the decision for ``site``."""
        return decide_site(site).backend

    def explain(self, site: CallSite) -> Decision:
        """The decision for ``site``, measured if it is not known yet."""
        return decide_site(site)

    def benchmark(self, kernel: Any, **kwargs: Any) -> Any:
        """``kernel_bench.benchmark_kernel(kernel, **kwargs)``."""
        return benchmark_kernel(kernel, **kwargs)

    def __repr__(self) -> str:
        return "kernel_bench.autotune.CHOOSER"
