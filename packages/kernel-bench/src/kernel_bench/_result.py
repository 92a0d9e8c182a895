"""``BenchmarkResult``: a list of records with reports (table, plot) and JSON/CSV files."""

from __future__ import annotations

import csv
import io
import json
import os
import pathlib
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from ._console import print_report, report_text
from ._record import FLOAT_FIELDS, RECORD_FIELDS, BenchmarkRecord
from ._report import records_report
from ._version import __version__

__all__ = ["FILE_FORMATS", "BenchmarkResult"]

#: File formats of ``save``/``load``, by file suffix.
FILE_FORMATS: tuple[str, ...] = (".json", ".csv")
_JSON_FIELDS = ("kernel_kwargs", "data_kwargs")
_INT_FIELDS = ("program_calls", "rounds")
# The columns of the first CSV files: a file with these alone still loads.
_FIRST_FIELDS = RECORD_FIELDS[:11]


def _file_format(path: pathlib.Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in FILE_FORMATS:
        raise ValueError(
            f"`path` must end in one of {', '.join(FILE_FORMATS)} (the file format), got '{path}'"
        )
    return suffix


class BenchmarkResult:
    """The records of a benchmark run, with reports and files.

    Args:
        records: the records, in the order they were measured.
        metadata: JSON data about the run (versions, device); kept in JSON files.

    Example:
        >>> r = BenchmarkResult([
        ...     BenchmarkRecord("cpu", "jax", "add/n=8", 2.0, 0.1, 1.9, 500.0, True),
        ...     BenchmarkRecord("cpu", "numba", "add/n=8", 1.0, 0.1, 0.9, 1000.0, True),
        ... ])
        >>> r.fastest("add/n=8").backend
        'numba'
    """

    def __init__(
        self, records: Iterable[BenchmarkRecord] = (), *, metadata: Mapping[str, Any] | None = None
    ) -> None:
        self.records: list[BenchmarkRecord] = list(records)
        for i, r in enumerate(self.records):
            if not isinstance(r, BenchmarkRecord):
                raise TypeError(f"`records` entry {i} must be a BenchmarkRecord, got {type(r)!r}")
        self.metadata: dict[str, Any] = dict(metadata or {})

    def __repr__(self) -> str:
        return f"BenchmarkResult(<{len(self.records)} records>)"

    def __len__(self) -> int:
        return len(self.records)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BenchmarkResult):
            return NotImplemented
        return self.records == other.records and self.metadata == other.metadata

    __hash__ = None  # type: ignore[assignment]

    @property
    def labels(self) -> list[str]:
        """The labels (cases) of the records, each once, in order."""
        return list(dict.fromkeys(r.label for r in self.records))

    def fastest(self, label: str) -> BenchmarkRecord:
        """The successful record of ``label`` with the smallest time per call: the
        median inside a compiled program where measured (``time_ms``), else the
        median dispatch, else (older files) the mean.

        Raises ValueError if no record has that label, or none of them succeeded.
        """
        candidates = [r for r in self.records if r.label == label]
        if not candidates:
            known = ", ".join(map(repr, self.labels)) or "none"
            raise ValueError(f"no benchmark record has label {label!r}; labels: {known}")
        timed = [r for r in candidates if r.success and r.time_ms is not None]
        if not timed:
            tried = ", ".join(repr(r.backend) for r in candidates)
            raise ValueError(f"every backend failed on {label!r} (tried {tried})")
        return min(timed, key=lambda r: r.time_ms)  # type: ignore[arg-type,return-value]

    def table(
        self,
        *,
        sort_by: str | None = None,
        group_by: str | None = None,
        compare_by: str | None = None,
        highlight_best: bool = True,
        speedup_vs: str | None = None,
        measure: str | None = None,
    ) -> str:
        """The table that ``print`` shows anywhere but a terminal, as a string."""
        report = records_report(
            self.records,
            sort_by=sort_by,
            group_by=group_by,
            compare_by=compare_by,
            highlight_best=highlight_best,
            speedup_vs=speedup_vs,
            measure=measure,
        )
        return report_text(report)

    def print(
        self,
        *,
        sort_by: str | None = None,
        group_by: str | None = None,
        compare_by: str | None = None,
        highlight_best: bool = True,
        speedup_vs: str | None = None,
        file: TextIO | None = None,
        measure: str | None = None,
    ) -> None:
        """Print the records as a table.

        Args:
            sort_by: order rows by a field: ``"label"``, ``"platform"``,
                ``"backend"``, ``"time_ms"``, ``"program_median_ms"``,
                ``"median_ms"``, ``"mean_ms"``, ``"std_ms"``, ``"min_ms"``
                (ascending), ``"throughput"`` or ``"speedup"`` (best first).
                Records without that value come last. None keeps the
                measured order.
            group_by: one table per value of ``"label"``, ``"platform"`` or ``"backend"``.
            compare_by: one column per value of this field (typically
                ``"backend"``: one row per case, one time column per backend).
                Failures are listed under the table.
            highlight_best: mark the fastest successful backend of each case with ``*``
                (on a terminal: in bold green), and every other one as fast within
                the noise (medians within 5 %, or interquartile ranges overlapping).
            speedup_vs: a backend; add how many times faster than it each record
                is on the same case (``"2.00x"``: half its time).
            file: where to print; standard output by default. The table is
                drawn with rich: on a terminal fitted to its width, failures in
                red; anywhere else as the plain text ``table`` returns.
            measure: what the one-column-per-backend table shows and ranks by
                (with ``compare_by``): ``"program"``, the median time per call
                inside a compiled program (a chain of calls in one ``jit``, what
                backend ``"auto"`` optimises), or ``"dispatch"``, the median of
                one jitted call per run; None: ``"program"`` where measured. The
                one-row-per-record table shows both.
        """
        report = records_report(
            self.records,
            sort_by=sort_by,
            group_by=group_by,
            compare_by=compare_by,
            highlight_best=highlight_best,
            speedup_vs=speedup_vs,
            measure=measure,
        )
        print_report(report, file)

    def plot(self, path: str | os.PathLike[str], *, title: str | None = None) -> pathlib.Path:
        """Write a PNG chart of the time per call of every backend on every case.

        One panel per kernel, one group of bars per case, one bar per backend
        (log scale): the median time per call (in program where measured,
        else dispatch), its error bar from the 25th to the 75th percentile;
        the fastest backend of each case in bold, and any as fast within the
        noise. ``title`` heads the chart (default: none). Needs matplotlib;
        the global pyplot state is not touched.

        Returns:
            The path written.

        Raises:
            ValueError: ``path`` does not end in ``.png``, or the result has no
                records.
        """
        from ._plot import plot_records

        return plot_records(self.records, pathlib.Path(path), title=title)

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON data: ``{"kernel_bench_version", "metadata", "records"}``."""
        return {
            "kernel_bench_version": __version__,
            "metadata": dict(self.metadata),
            "records": [r.to_dict() for r in self.records],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchmarkResult:
        """The result that ``to_dict`` gave ``data``."""
        if not isinstance(data, Mapping) or not isinstance(data.get("records"), list):
            raise ValueError(
                "benchmark result data must be a dict with a 'records' list, as written by "
                f"BenchmarkResult.to_dict, got {type(data)!r}"
            )
        records = [BenchmarkRecord.from_dict(r) for r in data["records"]]
        return cls(records, metadata=data.get("metadata") or {})

    def save(self, path: str | os.PathLike[str]) -> pathlib.Path:
        """Write the result to ``path``: JSON (``.json``, with metadata) or CSV (``.csv``).

        In CSV, one row per record; ``kernel_kwargs`` and ``data_kwargs`` are JSON text.

        Returns:
            The path written.
        """
        path = pathlib.Path(path)
        if _file_format(path) == ".json":
            path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
            return path
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=RECORD_FIELDS, lineterminator="\n")
        writer.writeheader()
        for r in self.records:
            row = r.to_dict()
            for k in _JSON_FIELDS:
                row[k] = json.dumps(row[k], sort_keys=True)
            row["autotune"] = "" if r.autotune is None else json.dumps(r.autotune, sort_keys=True)
            for k in (*FLOAT_FIELDS, *_INT_FIELDS, "error"):
                row[k] = "" if row[k] is None else row[k]
            writer.writerow(row)
        path.write_text(buffer.getvalue())
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> BenchmarkResult:
        """Read a result that ``save`` wrote (the format from the suffix)."""
        path = pathlib.Path(path)
        if _file_format(path) == ".json":
            try:
                loaded = json.loads(path.read_text())
            except json.JSONDecodeError as exc:
                raise ValueError(f"'{path}' is not a JSON file: {exc}") from None
            return cls.from_dict(loaded)
        reader = csv.DictReader(io.StringIO(path.read_text()))
        if reader.fieldnames is None or tuple(reader.fieldnames) not in (
            RECORD_FIELDS,
            _FIRST_FIELDS,
        ):
            raise ValueError(
                f"'{path}' is not a benchmark CSV file: its header must be "
                f"{','.join(RECORD_FIELDS)}, got {','.join(reader.fieldnames or [])}"
            )
        records = []
        for row in reader:
            data: dict[str, Any] = dict(row)
            for k in FLOAT_FIELDS:
                data[k] = float(row[k]) if row.get(k) else None
            for k in _INT_FIELDS:
                data[k] = int(row[k]) if row.get(k) else None
            data["autotune"] = json.loads(row["autotune"]) if row.get("autotune") else None
            for k in _JSON_FIELDS:
                data[k] = json.loads(row[k])
            data["success"] = row["success"] == "True"
            data["error"] = row["error"] or None
            records.append(BenchmarkRecord(**data))
        return cls(records)
