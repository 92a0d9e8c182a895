"""``BenchmarkRecord``: the outcome of one backend on one case, in a JSON-safe
form; and the rule that tells two records' times apart (``slower_beyond_noise``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "FLOAT_FIELDS",
    "RECORD_FIELDS",
    "TIE",
    "BenchmarkRecord",
    "failed_record",
    "jsonable",
    "quartiles",
    "slower_beyond_noise",
    "verbose_line",
]

#: Two medians within this relative difference are a tie: an autotune
#: decision's margin must exceed it (and its noise) to be settled, and the
#: suite counts two backends apart only beyond it (:func:`slower_beyond_noise`).
#: One number, so the autotuner and the suite's report agree on what a close
#: call is.
TIE = 0.05

#: The fields holding a float or None.
FLOAT_FIELDS: tuple[str, ...] = (
    "mean_ms",
    "std_ms",
    "min_ms",
    "throughput",
    "median_ms",
    "q25_ms",
    "q75_ms",
    "program_median_ms",
    "program_min_ms",
    "program_q25_ms",
    "program_q75_ms",
    "noise",
)


def jsonable(value: Any) -> Any:
    """``value`` as JSON data: containers kept, scalars unboxed, dtypes by name, the rest by repr."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return np.dtype(value).name
    try:  # jnp.float32 and the like are not numpy types but name a dtype
        return np.dtype(value).name
    except TypeError:
        return repr(value)


@dataclasses.dataclass(frozen=True)
class BenchmarkRecord:
    """One backend on one case: its times, or why it failed.

    Attributes:
        platform: ``"cpu"``, ``"gpu"`` or ``"tpu"``.
        backend: the backend's name (``"numba"``, ``"jax"``...).
        label: the case, ``"<kernel>/<case name>"``; records of one label are
            comparable.
        mean_ms, std_ms, min_ms: time per call in milliseconds over the timed
            runs (each a lone dispatch of the jitted call, or ``n_batch_per_run``
            calls chained); None when the backend failed before it could be
            timed. Kept for files; reports use the median.
        throughput: calls per second (``1000 / mean_ms``); None without a time.
        success: whether the backend ran and its results agreed with the
            reference backend's.
        error: why not, else None.
        kernel_kwargs: the static keywords of the call (as JSON data).
        data_kwargs: the description of the data (as JSON data).
        median_ms, q25_ms, q75_ms: median and quartiles of the same runs as
            ``mean_ms`` (dispatch).
        program_median_ms, program_min_ms, program_q25_ms, program_q75_ms:
            time per call inside one compiled program (a chain of calls in one
            ``jit``, as the autotuner measures), over ``rounds`` rounds
            interleaved with the case's other backends; None when not measured.
            The verdict (fastest backend, speed-ups) uses ``program_median_ms``.
        program_calls: calls chained per in-program run.
        rounds: in-program rounds.
        noise: the machine's noise in those rounds: the interquartile range
            over the median of a tiny reference operation timed alongside.
        autotune: for backend ``"auto"``: the decision it ran (JSON data:
            ``backend``, ``source``, ``signature``, ``margin`` (None where
            infinite or unknown), ``runner_up``, ``noise``, ``busy``, ``load``,
            ``left_out``, ``ms_per_call``, ``key``; see ``_observed``).
    """

    platform: str
    backend: str
    label: str
    mean_ms: float | None
    std_ms: float | None
    min_ms: float | None
    throughput: float | None
    success: bool
    error: str | None = None
    kernel_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    data_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    median_ms: float | None = None
    q25_ms: float | None = None
    q75_ms: float | None = None
    program_median_ms: float | None = None
    program_min_ms: float | None = None
    program_q25_ms: float | None = None
    program_q75_ms: float | None = None
    program_calls: int | None = None
    rounds: int | None = None
    noise: float | None = None
    autotune: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        # Records hold JSON data only, so a saved and reloaded record is equal to this one.
        for name in ("kernel_kwargs", "data_kwargs"):
            object.__setattr__(self, name, jsonable(dict(getattr(self, name))))
        if self.autotune is not None:
            object.__setattr__(self, "autotune", jsonable(dict(self.autotune)))
        for name in FLOAT_FIELDS:
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, float(value))
        for name in ("program_calls", "rounds"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, int(value))
        object.__setattr__(self, "success", bool(self.success))

    @property
    def time_ms(self) -> float | None:
        """The time reports rank by: the in-program median where measured, else
        the dispatch median, else the mean (records of older files)."""
        for value in (self.program_median_ms, self.median_ms, self.mean_ms):
            if value is not None:
                return value
        return None

    def to_dict(self) -> dict[str, Any]:
        """The record as a dict of JSON data, one key per field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchmarkRecord:
        """The record that ``to_dict`` gave ``data``; unknown keys are refused."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a benchmark record must be a dict of its fields, got {data!r}")
        unknown = sorted(set(data) - set(RECORD_FIELDS))
        if unknown:
            raise ValueError(
                f"benchmark record has unknown fields {unknown}; known: {', '.join(RECORD_FIELDS)}"
            )
        return cls(**data)


#: The fields of a record, in the order of a CSV file's columns.
RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(BenchmarkRecord))


def failed_record(record: BenchmarkRecord, message: str) -> BenchmarkRecord:
    """``record`` marked as failed (``success=False``) with ``message``, its times kept."""
    fields = record.to_dict()
    fields.update(success=False, error=message)
    return BenchmarkRecord(**fields)


def quartiles(r: BenchmarkRecord, measure: str) -> tuple[float | None, float | None, float | None]:
    """The median, 25th and 75th percentile of ``r``'s time ``measure``d
    ``"program"`` (in program) or ``"dispatch"`` (a record of an older file
    has its mean for a median, and no quartiles)."""
    if measure not in ("program", "dispatch"):
        raise ValueError(f"`measure` must be 'program' or 'dispatch', got {measure!r}")
    if measure == "program":
        return r.program_median_ms, r.program_q25_ms, r.program_q75_ms
    median = r.median_ms if r.median_ms is not None else r.mean_ms
    return median, r.q25_ms, r.q75_ms


def slower_beyond_noise(
    slow: BenchmarkRecord, fast: BenchmarkRecord, measure: str = "program"
) -> bool:
    """Whether ``slow`` took longer than ``fast`` by more than their rounds'
    noise, measured ``"program"`` (in program) or ``"dispatch"``: its median
    more than :data:`TIE` above ``fast``'s, and the interquartile ranges
    apart (``slow``'s 25th percentile above ``fast``'s 75th). Where either
    lacks its quartiles, the medians alone decide; where either lacks a
    median, nothing is beyond the noise.

    Example:
        >>> a = BenchmarkRecord("cpu", "a", "k/n=1", 1.0, 0.0, 1.0, 1.0, True,
        ...                     program_median_ms=1.0, program_q25_ms=0.9, program_q75_ms=1.1)
        >>> b = dataclasses.replace(a, backend="b", program_median_ms=1.3,
        ...                         program_q25_ms=1.05, program_q75_ms=1.5)
        >>> slower_beyond_noise(b, a), slower_beyond_noise(a, b)
        (False, False)
        >>> slower_beyond_noise(dataclasses.replace(b, program_q25_ms=1.2), a)
        True
    """
    median, low, _ = quartiles(slow, measure)
    other, _, high = quartiles(fast, measure)
    if median is None or other is None or median <= other * (1 + TIE):
        return False
    return low is None or high is None or low > high


def verbose_line(r: BenchmarkRecord) -> str:
    """The line ``benchmark_kernel(verbose=True)`` prints for a record."""
    if r.mean_ms is None:
        return f"{r.label}  {r.backend}: failed: {r.error}"
    status = "" if r.success else f"  ({r.error})"
    iqr = (r.q75_ms or 0.0) - (r.q25_ms or 0.0)
    return (
        f"{r.label}  {r.backend}: median {r.median_ms:.4g} ms, IQR {iqr:.2g} "
        f"(min {r.min_ms:.4g}){status}"
    )
