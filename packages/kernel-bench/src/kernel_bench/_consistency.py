"""Does backend ``"auto"`` run as fast as the best fixed backend? And where not, why.

After a run, every case where ``auto``'s median time in program is slower than
the fastest fixed backend's by more than the noise is listed with a reason:

- **noise**: auto runs the fastest backend itself; two timings of the same
  code differ by more than the machine's measured spread;
- **decision from disk**: the decision was measured in an earlier process (or
  by process 0), on another day's machine load. This run's times contradict
  it beyond the noise, so :func:`forget_stale` removes it from this
  machine's autotune cache: the next process measures it again;
- **machine busy when decided**: the autotuner saw a loaded machine (with
  the share of the CPUs other processes used then, where it was measured);
- **tie within noise**: the autotuner's own margin between its pick and the
  runner-up was within its measured noise;
- **times moved**: the pick or the fastest backend ran here at a time that
  differs from the autotuner's own median of it by more than the noise (a
  threaded kernel's speed on few cores changes with what ran before it:
  ``tools/bench_thread_states.py``); both figures are given;
- **machine noisy**: the reference operation timed alongside spread by more
  than :data:`NOISY` in this run;
- **different data or rounds**: none of the above. The autotuner and the
  suite time the same compiled program per backend (a chain of calls in one
  ``jit``), with the same calibration, warm-up round, shuffled interleaved
  rounds and statistic (the median); what still differs is the data (the
  autotuner's of the call's shapes, the case's here) and the rounds (earlier
  ones, in the autotuner's own budget).

``auto`` counts as slower beyond the noise where its median is more than
:data:`MIN_TOLERANCE` above the fastest backend's and the two interquartile
ranges do not overlap (auto's 25th percentile above the other's 75th): a gap
the rounds' own spread cannot explain.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ._record import TIE, BenchmarkRecord, slower_beyond_noise
from .autotune._decide import forget

__all__ = [
    "AUTO",
    "MIN_TOLERANCE",
    "NOISY",
    "Disagreement",
    "check_consistency",
    "forget_stale",
]

AUTO = "auto"
#: The least relative difference counted as a difference: the autotuner's tie.
MIN_TOLERANCE = TIE
#: A reference-op spread (interquartile range over median) above which the
#: machine is called noisy.
NOISY = 0.10


@dataclasses.dataclass(frozen=True)
class Disagreement:
    """A case where ``auto`` was slower than the fastest fixed backend beyond the noise.

    Attributes:
        label: the case.
        auto_ms: auto's median time per call in program.
        best: the fastest fixed backend, in program.
        best_ms: its median time per call in program.
        picked: the backend auto ran (None where no decision was recorded).
        noise: the machine's noise in those rounds (the reference op's spread).
        reason: why, in words (see the module's docstring).
        platform: the case's platform.
        stale_key: the key of auto's decision where it was read from this
            machine's disk (``Decision.key``): this run's times contradict it.
    """

    label: str
    auto_ms: float
    best: str
    best_ms: float
    picked: str | None
    noise: float | None
    reason: str
    platform: str = "cpu"
    stale_key: str | None = None

    @property
    def ratio(self) -> float:
        """auto's time over the fastest backend's."""
        return self.auto_ms / self.best_ms

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "ratio": self.ratio}


def _reason(auto: BenchmarkRecord, best: BenchmarkRecord, by_backend: dict[str, Any]) -> str:
    decision = auto.autotune or {}
    picked = decision.get("backend")
    margin, noise = decision.get("margin"), decision.get("noise")
    if picked is None:
        return "no decision recorded: auto ran without the autotuner"
    if picked == best.backend:
        return (
            f"noise: auto runs {picked}, the fastest backend; two timings of the same code "
            f"differ by more than the spread measured (reference op {auto.noise or 0:.0%})"
        )
    ahead = "" if margin is None else f", where it measured {picked} {margin:.2f}x ahead"
    mine = by_backend.get(picked)
    seen = (
        f"; this run measured {picked} at {mine.program_median_ms:.4g} ms"
        if mine is not None and mine.program_median_ms is not None
        else ""
    )
    if decision.get("source") in ("disk", "process 0"):
        return f"decision from disk: measured in an earlier process{ahead}{seen}"
    if decision.get("busy"):
        load = decision.get("load")
        others = "" if load is None else f" (other processes used {load:.0%} of the CPUs)"
        return f"machine busy when decided{others}{ahead}{seen}"
    if margin is not None and margin <= 1 + max(noise or 0.0, MIN_TOLERANCE):
        spread = "" if noise is None else f" (its noise {noise:.0%})"
        return f"tie within noise: the autotuner's margin was {margin:.2f}x{spread}{seen}"
    moved = _moved(decision, (picked, best.backend), by_backend, noise)
    if moved:
        return f"times moved since the autotuner's rounds: {moved}"
    if auto.noise is not None and auto.noise > NOISY:
        return f"machine noisy: the reference op spread {auto.noise:.0%} in this run{seen}"
    return (
        "different data or rounds: the autotuner timed the same program on its own data "
        f"of the call's shapes, in its own rounds{ahead}{seen}"
    )


def _moved(
    decision: dict[str, Any],
    backends: tuple[str, str],
    by_backend: dict[str, Any],
    noise: float | None,
) -> str:
    """Each of ``backends`` whose median here and in the autotuner's rounds
    differ by more than the autotuner's noise (at least MIN_TOLERANCE), as
    "numba 0.06 ms there, 0.14 ms here (2.3x)"; empty where none did."""
    tuned = decision.get("ms_per_call") or {}
    tolerance = 1 + max(noise or 0.0, MIN_TOLERANCE)
    parts = []
    for backend in backends:
        there, record = tuned.get(backend), by_backend.get(backend)
        here = None if record is None else record.program_median_ms
        if not there or not here:
            continue
        if max(here / there, there / here) > tolerance:
            parts.append(
                f"{backend} {there:.4g} ms there, {here:.4g} ms here ({here / there:.2f}x)"
            )
    return "; ".join(parts)


def check_consistency(
    records: Sequence[BenchmarkRecord],
) -> tuple[list[Disagreement], int]:
    """The cases where ``auto`` is slower than the fastest fixed backend by more
    than the noise, each with its reason; and how many cases were compared
    (those where auto and at least one fixed backend have an in-program time)."""
    cases: dict[tuple[str, str], dict[str, BenchmarkRecord]] = {}
    for r in records:
        if r.success and r.program_median_ms is not None:
            cases.setdefault((r.label, r.platform), {})[r.backend] = r
    found, compared = [], 0
    for (label, platform), by_backend in cases.items():
        auto = by_backend.get(AUTO)
        fixed = [r for b, r in by_backend.items() if b != AUTO]
        if auto is None or not fixed:
            continue
        compared += 1
        best = min(fixed, key=lambda r: r.program_median_ms)  # type: ignore[arg-type,return-value]
        if not slower_beyond_noise(auto, best):
            continue
        found.append(
            Disagreement(
                label=label,
                auto_ms=auto.program_median_ms,  # type: ignore[arg-type]
                best=best.backend,
                best_ms=best.program_median_ms,  # type: ignore[arg-type]
                picked=(auto.autotune or {}).get("backend"),
                noise=auto.noise,
                reason=_reason(auto, best, by_backend),
                platform=platform,
                stale_key=_from_disk(auto.autotune or {}, best.backend),
            )
        )
    return found, compared


def _from_disk(decision: dict[str, Any], best: str) -> str | None:
    # The key of a decision read from this machine's disk that picked another
    # backend than this run's fastest (process 0's decisions are its own).
    key = decision.get("key")
    stale = decision.get("source") == "disk" and decision.get("backend") != best
    return key if stale and isinstance(key, str) else None


def forget_stale(found: Sequence[Disagreement]) -> list[Disagreement]:
    """``found`` after forgetting each decision from disk that this run
    contradicts (``stale_key``), on disk and in this process, so that the next
    process measures it again; the reason of each forgotten one says so."""
    out = []
    for d in found:
        if d.stale_key is not None and forget(d.platform, [d.stale_key]):
            d = dataclasses.replace(
                d,
                reason=f"{d.reason}; removed from the autotune cache, so the next run "
                "measures it again",
            )
        out.append(d)
    return out
