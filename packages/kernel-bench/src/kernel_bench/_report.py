"""What the tables of benchmark records hold: columns of marked cells.

``records_report`` builds the tables once (``Report``: ``Table`` of ``Cell``);
``_console`` draws them with rich, on a terminal and anywhere else alike.

The time a table ranks by is the median inside a compiled program where it was
measured (``BenchmarkRecord.time_ms``); the columns say which measurement they
show: "in program" (a chain of calls in one ``jit``, as the autotuner measures)
or "dispatch" (one jitted call per timed run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ._record import TIE, BenchmarkRecord, slower_beyond_noise

__all__ = [
    "BEST",
    "BEST_MEANING",
    "FAILED",
    "GROUP_KEYS",
    "MEASURES",
    "NO_RECORDS",
    "SORT_KEYS",
    "Cell",
    "Column",
    "Report",
    "Table",
    "format_ms",
    "format_rate",
    "records_report",
]

#: Fields that name a record: what ``group_by`` and ``compare_by`` accept.
GROUP_KEYS: tuple[str, ...] = ("label", "platform", "backend")
#: What ``sort_by`` accepts. Times sort ascending; throughput and speedup
#: descending (best first); names alphabetically. Failed records sort last.
SORT_KEYS: tuple[str, ...] = (
    "label",
    "platform",
    "backend",
    "time_ms",
    "program_median_ms",
    "median_ms",
    "mean_ms",
    "std_ms",
    "min_ms",
    "throughput",
    "speedup",
)
#: What ``measure`` accepts: the time a wide table shows and ranks by.
MEASURES: tuple[str, ...] = ("program", "dispatch")
_DESCENDING = ("throughput", "speedup")
_STATUS_WIDTH = 60
_NOTE_WIDTH = 200

#: The mark of the fastest successful backend of a case, and of any other
#: not slower than it beyond the noise (``slower_beyond_noise``).
BEST = "*"
#: The mark of a backend that failed (raised, or its results differ).
FAILED = "!"
#: What a ``BEST`` mark means; written under a table after ``*``.
BEST_MEANING = (
    f"fastest backend of the case, and any as fast within the noise (medians within {TIE:.0%}, "
    "or interquartile ranges overlapping)"
)
#: The text of a report without records.
NO_RECORDS = "(no benchmark records)"


def format_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def format_rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _shorten(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 3] + "..."


class Column(NamedTuple):
    """A column of a ``Table``.

    Args:
        name: the header.
        numeric: right-aligned.
        marked: the cells' marks are shown as text after them (``"0.5 *"``;
            on a terminal only ``!``, colour showing the fastest).
        limit: in plain text, longer cells are cut to this many characters
            (ending in ``...``); on a terminal they are shown whole, wrapped.
    """

    name: str
    numeric: bool = False
    marked: bool = False
    limit: int | None = None


class Cell(NamedTuple):
    """One cell: its text and its mark (``BEST``, ``FAILED`` or ``""``)."""

    text: str
    mark: str = ""


@dataclass(frozen=True)
class Table:
    """Columns and rows of cells, with an optional title above and notes below."""

    columns: tuple[Column, ...]
    rows: tuple[tuple[Cell, ...], ...]
    title: str | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def from_strings(
        cls, header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]
    ) -> Table:
        """A table of unmarked cells."""
        columns = tuple(Column(h, numeric=num) for h, num in zip(header, numeric, strict=True))
        return cls(columns, tuple(tuple(Cell(c) for c in row) for row in rows))

    def texts(self, *, terminal: bool = False) -> list[list[str]]:
        """The cells' text as shown: in plain text, or (``terminal``) beside
        colour, which marks the fastest backend instead of ``*`` and needs no cut."""
        shown = (FAILED,) if terminal else (BEST, FAILED)
        # A column showing a mark pads its unmarked cells, so that the digits line up.
        pad = [
            column.marked and any(row[j].mark in shown for row in self.rows)
            for j, column in enumerate(self.columns)
        ]
        out = []
        for row in self.rows:
            line = []
            for j, (cell, column) in enumerate(zip(row, self.columns, strict=True)):
                text = cell.text
                if column.limit is not None and not terminal:
                    text = _shorten(text, column.limit)
                if pad[j] and text:
                    text += f" {cell.mark}" if cell.mark in shown else "  "
                line.append(text)
            out.append(line)
        return out


@dataclass(frozen=True)
class Report:
    """Tables shown one after the other; ``marks_best``: some cell is marked
    ``BEST``, and a line below the tables says what that means."""

    tables: tuple[Table, ...]
    marks_best: bool = False


def _program(r: BenchmarkRecord) -> float | None:
    return r.program_median_ms


def _dispatch(r: BenchmarkRecord) -> float | None:
    # Records of older files have no median: their mean stands in.
    return r.median_ms if r.median_ms is not None else r.mean_ms


_GETTERS: dict[str, Callable[[BenchmarkRecord], float | None]] = {
    "program": _program,
    "dispatch": _dispatch,
}
#: What a wide table's time columns are called, per measure.
MEASURE_NAMES = {"program": "in program", "dispatch": "dispatch"}


def _check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value is not None and value not in choices:
        raise ValueError(
            f"`{name}` must be None or one of {', '.join(map(repr, choices))}, got {value!r}"
        )


def _speedups(
    records: Sequence[BenchmarkRecord], reference: str | None, get: Callable[..., float | None]
) -> dict[int, float | None]:
    if reference is None:
        return {}
    ref_ms = {
        (r.label, r.platform): get(r)
        for r in records
        if r.backend == reference and r.success and get(r)
    }
    out: dict[int, float | None] = {}
    for i, r in enumerate(records):
        base, own = ref_ms.get((r.label, r.platform)), get(r)
        out[i] = base / own if base is not None and own else None
    return out


def _best(records: Sequence[BenchmarkRecord], measure: str) -> set[int]:
    # The fastest successful record of each case, and every other one not
    # slower than it beyond the noise (``slower_beyond_noise``): a verdict the
    # rounds' spread could flip marks all the backends it could go to.
    get = _GETTERS[measure]
    fastest: dict[tuple[str, str], int] = {}
    timed = [i for i, r in enumerate(records) if r.success and get(r) is not None]
    for i in timed:
        key = (records[i].label, records[i].platform)
        if key not in fastest or get(records[i]) < get(records[fastest[key]]):  # type: ignore[operator]
            fastest[key] = i
    return {
        i
        for i in timed
        if not slower_beyond_noise(
            records[i], records[fastest[records[i].label, records[i].platform]], measure
        )
    }


def _sort_key(
    sort_by: str, records: Sequence[BenchmarkRecord], speedup: dict[int, float | None]
) -> Callable[[int], tuple[Any, ...]]:
    def key(i: int) -> tuple[Any, ...]:
        value = speedup.get(i) if sort_by == "speedup" else getattr(records[i], sort_by)
        if value is None:
            return (1, 0)
        return (0, -value if sort_by in _DESCENDING else value)

    return key


def records_report(
    records: Sequence[BenchmarkRecord],
    *,
    sort_by: str | None = None,
    group_by: str | None = None,
    compare_by: str | None = None,
    highlight_best: bool = True,
    speedup_vs: str | None = None,
    measure: str | None = None,
) -> Report:
    """The tables of the records; see ``BenchmarkResult.print`` for the options."""
    _check_choice("sort_by", sort_by, SORT_KEYS)
    _check_choice("measure", measure, MEASURES)
    _check_choice("group_by", group_by, GROUP_KEYS)
    _check_choice("compare_by", compare_by, GROUP_KEYS)
    if group_by is not None and group_by == compare_by:
        raise ValueError(f"`group_by` and `compare_by` must differ, got {group_by!r} for both")
    backends = list(dict.fromkeys(r.backend for r in records))
    if speedup_vs is not None and speedup_vs not in backends:
        raise ValueError(
            f"`speedup_vs` must be a backend of the records ({', '.join(map(repr, backends))}), "
            f"got {speedup_vs!r}"
        )
    if sort_by == "speedup" and speedup_vs is None:
        raise ValueError("`sort_by='speedup'` needs `speedup_vs`, the backend to compare with")
    if not records:
        return Report(())

    if measure is None:
        measured = any(r.program_median_ms is not None for r in records)
        measure = "program" if measured else "dispatch"
    get = _GETTERS[measure]
    speedup = _speedups(records, speedup_vs, get)
    best = _best(records, measure) if highlight_best else set()
    order = list(range(len(records)))
    if sort_by is not None:
        order.sort(key=_sort_key(sort_by, records, speedup))
    groups: dict[Any, list[int]] = {}
    for i in order:
        groups.setdefault(None if group_by is None else getattr(records[i], group_by), []).append(i)

    ranking = _Ranking(records, best, speedup, speedup_vs, measure)
    tables = []
    for value, members in groups.items():
        title = None if group_by is None else f"{group_by}: {value}"
        tables.append(
            _long(ranking, members, group_by, title)
            if compare_by is None
            else _wide(ranking, members, group_by, compare_by, title)
        )
    return Report(tuple(tables), marks_best=bool(best))


@dataclass(frozen=True)
class _Ranking:
    # What every table of one report shares: the records by index, the fastest
    # of each case, each record's speedup over `speedup_vs`, the measure ranked by.
    records: Sequence[BenchmarkRecord]
    best: set[int]
    speedup: dict[int, float | None]
    speedup_vs: str | None
    measure: str


def _long(ranking: _Ranking, members: list[int], group_by: str | None, title: str | None) -> Table:
    records, best, speedup, speedup_vs = (
        ranking.records, ranking.best, ranking.speedup, ranking.speedup_vs
    )  # fmt: skip
    keys = [k for k in GROUP_KEYS if k != group_by]
    program = any(records[i].program_median_ms is not None for i in members)
    marked = bool(best.intersection(members))
    columns = [Column(k) for k in keys]
    if program:
        columns.append(Column("in program ms", numeric=True, marked=marked))
        columns += [Column(h, numeric=True) for h in ("in program IQR", "in program min")]
    columns.append(Column("dispatch ms", numeric=True, marked=marked and not program))
    columns += [Column(h, numeric=True) for h in ("dispatch IQR", "dispatch min")]
    if speedup_vs is not None:
        columns.append(Column(f"vs {speedup_vs}", numeric=True))
    columns.append(Column("status", limit=_STATUS_WIDTH))
    rows = []
    for i in members:
        r = records[i]
        mark = BEST if i in best else ""
        row = [Cell(getattr(r, k)) for k in keys]
        if program:
            row.append(Cell(format_ms(r.program_median_ms), mark))
            row.append(Cell(_iqr(r.program_q25_ms, r.program_q75_ms)))
            row.append(Cell(format_ms(r.program_min_ms)))
        row.append(Cell(format_ms(_dispatch(r)), "" if program else mark))
        row += [Cell(_iqr(r.q25_ms, r.q75_ms)), Cell(format_ms(r.min_ms))]
        if speedup_vs is not None:
            row.append(Cell(_format_speedup(speedup.get(i))))
        row.append(Cell("ok") if r.success else Cell(_first_line(r.error or "failed"), FAILED))
        rows.append(tuple(row))
    return Table(tuple(columns), tuple(rows), title)


def _iqr(q25: float | None, q75: float | None) -> str:
    return "-" if q25 is None or q75 is None else format_ms(q75 - q25)


def _wide(
    ranking: _Ranking, members: list[int], group_by: str | None, compare_by: str, title: str | None
) -> Table:
    records, best, speedup, speedup_vs = (
        ranking.records, ranking.best, ranking.speedup, ranking.speedup_vs
    )  # fmt: skip
    measure = ranking.measure
    get = _GETTERS[measure]
    keys = [k for k in GROUP_KEYS if k not in (group_by, compare_by)]
    values = list(dict.fromkeys(getattr(records[i], compare_by) for i in members))
    cells: dict[tuple[Any, ...], dict[Any, int]] = {}
    i: int | None  # a record's index, or None where a cell has no record
    for i in members:
        r = records[i]
        cells.setdefault(tuple(getattr(r, k) for k in keys), {})[getattr(r, compare_by)] = i
    name = (lambda v: str(v)) if compare_by == "backend" else (lambda v: f"{compare_by}={v}")
    with_speedup = [
        v
        for v in values
        if speedup_vs is not None and not (compare_by == "backend" and v == speedup_vs)
    ]
    # Columns holding a mark pad unmarked cells, so that the digits line up.
    marked = {
        getattr(records[i], compare_by) for i in members if i in best or not records[i].success
    }
    columns = [Column(k) for k in keys]
    unit = f"{MEASURE_NAMES[measure]} ms"
    columns += [Column(f"{name(v)} {unit}", numeric=True, marked=v in marked) for v in values]
    columns += [Column(f"{name(v)} vs {speedup_vs}", numeric=True) for v in with_speedup]
    rows, notes = [], []
    for row_key, by_value in cells.items():
        row = [Cell(k) for k in row_key]
        for v in values:
            i = by_value.get(v)
            if i is None:
                row.append(Cell(""))
                continue
            r = records[i]
            value = get(r)
            text = (
                format_ms(value) if value is not None else ("failed" if r.mean_ms is None else "-")
            )
            if not r.success:
                row.append(Cell(text, FAILED))
                where = ", ".join(f"{k} {getattr(r, k)}" for k in GROUP_KEYS)
                error = _shorten(_first_line(r.error or "failed"), _NOTE_WIDTH)
                notes.append(f"{FAILED} {where}: {error}")
            else:
                row.append(Cell(text, BEST if i in best else ""))
        for v in with_speedup:
            i = by_value.get(v)
            row.append(Cell(_format_speedup(None if i is None else speedup.get(i))))
        rows.append(tuple(row))
    return Table(tuple(columns), tuple(rows), title, tuple(notes))


def _format_speedup(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"
