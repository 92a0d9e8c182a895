"""``BenchmarkRecord``: the outcome of one backend on one case, in a JSON-safe form."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["RECORD_FIELDS", "BenchmarkRecord", "jsonable"]


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
            runs; None when the backend failed before it could be timed.
        throughput: calls per second (``1000 / mean_ms``); None without a time.
        success: whether the backend ran and its results agreed with the
            reference backend's.
        error: why not, else None.
        kernel_kwargs: the static keywords of the call (as JSON data).
        data_kwargs: the description of the data (as JSON data).
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

    def __post_init__(self) -> None:
        # Records hold JSON data only, so a saved and reloaded record is equal to this one.
        for name in ("kernel_kwargs", "data_kwargs"):
            object.__setattr__(self, name, jsonable(dict(getattr(self, name))))
        for name in ("mean_ms", "std_ms", "min_ms", "throughput"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, float(value))
        object.__setattr__(self, "success", bool(self.success))

    def to_dict(self) -> dict[str, Any]:
        """The record as a dict of JSON data, one key per field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchmarkRecord:
        """The record that ``to_dict`` gave ``data``; unknown keys are refused."""
        unknown = sorted(set(data) - set(RECORD_FIELDS))
        if unknown:
            raise ValueError(
                f"benchmark record has unknown fields {unknown}; known: {', '.join(RECORD_FIELDS)}"
            )
        return cls(**data)


#: The fields of a record, in the order of a CSV file's columns.
RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(BenchmarkRecord))
