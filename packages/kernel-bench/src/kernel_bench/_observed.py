"""The autotuner's decisions seen while a block runs, and the summary of one
that the suite stores beside a run of backend ``"auto"``.

The autotuner (``kernel_bench.autotune``) tells :func:`observe` every decision
it makes or looks up; :func:`recording` collects them for a block (the suite
wraps the warm-up of backend ``"auto"`` in it). This module sits below both the
autotuner and the suite's engine (``_kernel``), so that neither imports the
other to pass a decision along.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["decision_data", "observe", "recording"]

_lock = threading.Lock()
_recorders: list[list[Any]] = []


@contextlib.contextmanager
def recording() -> Iterator[list[Any]]:
    """Collect the decisions (``kernel_bench.autotune.Decision``) made or looked
    up while the block runs (in this thread and others), in order."""
    found: list[Any] = []
    with _lock:
        _recorders.append(found)
    try:
        yield found
    finally:
        with _lock:
            # By identity: two recorders' lists are often equal (both empty).
            _recorders[:] = [r for r in _recorders if r is not found]


def observe(decision: Any) -> None:
    """Hand ``decision`` to every :func:`recording` block open now."""
    with _lock:
        for found in _recorders:
            found.append(decision)


def decision_data(found: Sequence[Any], op: str) -> dict[str, Any] | None:
    """The decision behind a run of backend "auto", as JSON data; None without one.

    ``margin`` is the runner-up's time over the winner's (None with one candidate
    or none timed; for a decision read from an older cache, which has none, it
    is taken from the candidates' times), ``noise`` the relative spread of the
    autotuner's measurement, ``busy`` whether the machine was loaded then,
    ``load`` the share of the CPUs other processes used then (None where
    unknown), ``ms_per_call`` the autotuner's median of each backend it timed
    and ``key`` the decision's key in the autotune cache."""
    mine = [d for d in found if d.op == op] or list(found)
    if not mine:
        return None
    d = mine[0]
    timed = sorted((c.us_per_call, c.backend) for c in d.candidates if c.us_per_call is not None)
    runner_up = next((b for _, b in timed if b != d.backend), None)
    margin = d.margin
    if margin is None and len(timed) > 1 and timed[0][0] > 0:
        margin = timed[1][0] / timed[0][0]
    if margin is not None and math.isinf(margin):
        margin = None
    return {
        "backend": d.backend,
        "source": d.source,
        "signature": d.signature,
        "margin": margin,
        "runner_up": runner_up,
        "noise": d.noise,
        "busy": d.busy,
        "load": d.load,
        "left_out": [f"{c.backend} ({c.status})" for c in d.candidates if c.status != "ok"],
        "ms_per_call": {b: us / 1e3 for us, b in timed},
        "key": d.key,
    }
