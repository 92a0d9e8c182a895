"""Measuring the backends of one call signature: data, result checks, timing.

Every backend runs once on data of the call's shapes (from the kernel's
``def_autotune_data``, else random floats and zero integers); its results are
compared with the reference backend's (the platform's fixed default) within
per-dtype tolerances (``kernel_check.TOLERANCES``); the ones that fail or
disagree are never chosen. The rest are timed by kernel-bench's engine
(``_timing``), each run a chain of calls in one compiled program, the same
program the suite's in-program column times for that backend, a chain as
long as the suite's (``_timing.SECONDS_PER_RUN``, calibrated the same way);
the candidates interleaved round by round (a warm-up round
thrown away, the order shuffled every round) within the time budget. The
one with the lowest median time per call wins (the statistic the suite's
verdict uses), ties going to the earlier registered; the
decision records its margin over the runner-up, the noise of the winner's
rounds, the share of the CPUs other processes used while it was timed
(``_load.OtherLoad``) and whether the machine was busy: that load above
``BUSY_LOAD``, or where the load is unknown, the noise above ``BUSY_NOISE``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
from kernel_check import TOLERANCES, max_difference

from .._load import BUSY_LOAD, OtherLoad
from .._timing import SECONDS_PER_RUN, Spread, calls_per_run, chained, interleaved
from ._decision import BUSY_NOISE, AutotuneWarning, Candidate, Decision

__all__ = ["fallback", "measure"]

# At most as many rounds as the suite's default run, at least three; the
# budget decides in between.
MAX_ROUNDS = 15
MIN_ROUNDS = 3
# Two best candidates closer than this ratio get more rounds of their own.
_CLOSE = 1.10


def fallback(site: Any, reason: str) -> Decision:
    """The decision where nothing can be measured: the fixed default."""
    return Decision(
        site.op,
        site.platform,
        site.describe(),
        site.key,
        site.reference,
        source="fallback",
        reason=reason,
    )


# ------------------------------------------------------------------ data


def _default_data(struct: jax.ShapeDtypeStruct, rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(struct.dtype)
    if dtype.kind == "f" or dtype.name == "bfloat16":
        return rng.standard_normal(struct.shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(struct.shape) + 1j * rng.standard_normal(struct.shape)).astype(
            dtype
        )
    return np.zeros(struct.shape, dtype)


def _describe(struct: Any) -> str:
    return f"{np.dtype(struct.dtype).name}{list(struct.shape)}"


def example_data(site: Any) -> list[np.ndarray]:
    """Inputs of the call signature of ``site`` (batch axes in front)."""
    unbatched = site.input_structs()
    made = site.example_inputs()
    if made is None:
        rng = np.random.default_rng(int(site.key[:8], 16))
        made = [_default_data(s, rng) for s in unbatched]
    made = [np.asarray(x) for x in made]
    problem = None
    if len(made) != len(unbatched):
        problem = f"{len(made)} arrays for {len(unbatched)} inputs"
    else:
        for i, (x, s) in enumerate(zip(made, unbatched, strict=True)):
            if x.shape != s.shape or x.dtype != np.dtype(s.dtype):
                problem = f"{x.dtype.name}{list(x.shape)} for input {i}, {_describe(s)}"
                break
    if problem is not None:
        raise ValueError(
            f"the autotune data function of kernel {site.op!r} made {problem} was expected; "
            "it must return one array per input with the shapes and dtypes it is given"
        )
    return [np.broadcast_to(x, site.lead(i) + x.shape) for i, x in enumerate(made)]


# ------------------------------------------------------------------ checks


def _disagreement(ref: Sequence[Any], out: Sequence[Any]) -> str | None:
    for i, (a, b) in enumerate(zip(ref, out, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        rtol, atol = TOLERANCES.get(a.dtype.name, (0.0, 0.0))
        if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
            worst = max_difference(a, b)
            return f"output {i} differs by up to {worst:.3g} (rtol={rtol}, atol={atol})"
    return None


def _describe_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.split("\n-----", 1)[0].splitlines()[0] if text else type(exc).__name__


def _checked_runs(site: Any, data: Sequence[Any]) -> tuple[dict[str, Any], dict[str, Candidate]]:
    """The chained runs of the backends that ran and agree with the reference,
    and the candidates left out (warned about)."""
    runs: dict[str, Any] = {}
    outputs: dict[str, list[Any]] = {}
    left_out: dict[str, Candidate] = {}
    one = jax.numpy.asarray(1, dtype=jax.numpy.int32)
    for backend in site.backends:
        run = chained(site.runner(backend))
        try:
            outputs[backend] = jax.device_get(jax.block_until_ready(run(one, *data)))
        except Exception as exc:
            left_out[backend] = Candidate(backend, "failed", detail=_describe_error(exc))
            continue
        runs[backend] = run
    reference = site.reference
    if reference not in outputs and outputs:
        reference = next(iter(outputs))
    for backend in list(runs):
        problem = (
            None if backend == reference else _disagreement(outputs[reference], outputs[backend])
        )
        if problem is not None:
            left_out[backend] = Candidate(
                backend, "disagrees", detail=f"{problem} from {reference!r}"
            )
            del runs[backend]
    for c in left_out.values():
        warnings.warn(
            f"autotune of {site.op} ({site.describe()}) on {site.platform} leaves out backend "
            f"{c.backend!r}: {c.status}: {c.detail}",
            AutotuneWarning,
            stacklevel=6,
        )
    return runs, left_out


# ------------------------------------------------------------------ statistics


def _margin(winner: float, runner_up: float | None) -> float:
    if runner_up is None:
        return math.inf
    if winner <= 0:
        return math.inf if runner_up > 0 else 1.0
    return max(1.0, runner_up / winner)


# ------------------------------------------------------------------ measuring


def measure(site: Any, device: Any, budget: float) -> Decision:
    """The decision for ``site`` measured on ``device`` within ``budget``
    seconds of timing (see the module docs); the fixed default where every
    backend fails."""
    data = jax.device_put(example_data(site), device)
    runs, left_out = _checked_runs(site, data)
    if not runs:
        return fallback(site, "every backend failed on the measurement data")
    meter = OtherLoad()
    times, counts = _time(runs, data, budget)
    load = meter.share()
    candidates = []
    medians: dict[str, float] = {}
    for backend in site.backends:
        if backend in left_out:
            candidates.append(left_out[backend])
        else:
            t = tuple(times[backend])
            medians[backend] = Spread.of(t).median
            candidates.append(Candidate(backend, "ok", medians[backend], t))
    # Stable: of equal medians, the earlier registered wins.
    ranked = sorted(medians, key=medians.__getitem__)
    best = ranked[0]
    runner_up = medians[ranked[1]] if len(ranked) > 1 else None
    # The suite's statistics (_timing.Spread), so that its verdict and this
    # choice are made from the same figures.
    noise = Spread.of(times[best]).relative_iqr
    return Decision(
        site.op,
        site.platform,
        site.describe(),
        site.key,
        best,
        tuple(candidates),
        counts,
        margin=_margin(medians[best], runner_up),
        noise=noise,
        # The load, measured, says whether the machine was busy; the noise
        # only where the load is unknown (a threaded kernel's rounds spread
        # on a quiet machine too, and its margin over that spread settles it).
        busy=noise > BUSY_NOISE if load is None else load > BUSY_LOAD,
        load=load,
    )


def _too_short(times_us: list[float], count: int) -> bool:
    # The rounds' median run lasts under half the target.
    return Spread.of(times_us).median * count < SECONDS_PER_RUN * 1e6 / 2


def _time(
    runs: Mapping[str, Any], data: Sequence[Any], budget: float
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Microseconds per call of each run, round by round, every run in each
    round after a warm-up round, the order shuffled every round (the
    suite's ``_timing.interleaved``); each run a chain calibrated to last
    ``_timing.SECONDS_PER_RUN``, as the suite's in-program runs are, so that
    both time the same chains. Two thirds of the budget go to rounds of every
    candidate; where the two best medians are within :data:`_CLOSE` of each
    other, the last third to more rounds of those two alone. Where the
    rounds show a chain lasting less than half the run it was
    calibrated to, those chains are calibrated again and a third more of the
    budget times every candidate afresh."""
    counts = {b: calls_per_run(run, data, SECONDS_PER_RUN) for b, run in runs.items()}
    times: dict[str, list[float]] = {b: [] for b in runs}

    def rounds(names: list[str], seconds: float) -> None:
        found = interleaved(
            {b: runs[b] for b in names},
            counts,
            data,
            rounds=MAX_ROUNDS,
            seconds=seconds,
            min_rounds=MIN_ROUNDS,
        )
        for b, t in found.items():
            times[b] += t

    rounds(list(runs), budget * 2 / 3)
    short = [b for b in runs if _too_short(times[b], counts[b])]
    if short:
        # Calibrated while the machine was slow for a while after compiling
        # (a threaded kernel's first runs can take ten times their later
        # time), a chain lasts a fraction of the run it should: it would time
        # mostly its launch. Calibrated again, now that the rounds ran at
        # their rate, every candidate is timed afresh.
        counts.update({b: calls_per_run(runs[b], data, SECONDS_PER_RUN) for b in short})
        for b in runs:
            times[b] = []
        rounds(list(runs), budget / 3)
    if len(runs) > 2:
        median = {b: Spread.of(times[b]).median for b in runs}
        best, second = sorted(runs, key=median.__getitem__)[:2]
        if median[second] < _CLOSE * median[best]:
            rounds([best, second], budget / 3)
    elif len(runs) == 2:
        rounds(list(runs), budget / 3)
    return times, counts
