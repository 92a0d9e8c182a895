"""Text tables of benchmark records: one row per record, or one column per backend."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ._record import BenchmarkRecord

__all__ = ["GROUP_KEYS", "SORT_KEYS", "format_ms", "format_rate", "format_table", "render"]

#: Fields that name a record: what ``group_by`` and ``compare_by`` accept.
GROUP_KEYS: tuple[str, ...] = ("label", "platform", "backend")
#: What ``sort_by`` accepts. Times sort ascending; throughput and speedup
#: descending (best first); names alphabetically. Failed records sort last.
SORT_KEYS: tuple[str, ...] = (
    "label",
    "platform",
    "backend",
    "mean_ms",
    "std_ms",
    "min_ms",
    "throughput",
    "speedup",
)
_DESCENDING = ("throughput", "speedup")
_STATUS_WIDTH = 60


def format_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def format_rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _first_line(text: str, width: int = _STATUS_WIDTH) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 3] + "..."


def render(header: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]) -> str:
    """Columns aligned (numbers to the right) under a header and a rule."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(cells, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *map(line, rows)])


def _check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value is not None and value not in choices:
        raise ValueError(
            f"`{name}` must be None or one of {', '.join(map(repr, choices))}, got {value!r}"
        )


def _speedups(records: Sequence[BenchmarkRecord], reference: str | None) -> dict[int, float | None]:
    if reference is None:
        return {}
    ref_ms = {
        (r.label, r.platform): r.mean_ms
        for r in records
        if r.backend == reference and r.success and r.mean_ms
    }
    out: dict[int, float | None] = {}
    for i, r in enumerate(records):
        base = ref_ms.get((r.label, r.platform))
        out[i] = base / r.mean_ms if base is not None and r.mean_ms else None
    return out


def _best(records: Sequence[BenchmarkRecord]) -> set[int]:
    best: dict[tuple[str, str], int] = {}
    for i, r in enumerate(records):
        if not r.success or r.mean_ms is None:
            continue
        key = (r.label, r.platform)
        if key not in best or r.mean_ms < records[best[key]].mean_ms:  # type: ignore[operator]
            best[key] = i
    return set(best.values())


def _sort_key(
    sort_by: str, records: Sequence[BenchmarkRecord], speedup: dict[int, float | None]
) -> Callable[[int], tuple[Any, ...]]:
    def key(i: int) -> tuple[Any, ...]:
        value = speedup.get(i) if sort_by == "speedup" else getattr(records[i], sort_by)
        if value is None:
            return (1, 0)
        return (0, -value if sort_by in _DESCENDING else value)

    return key


def format_table(
    records: Sequence[BenchmarkRecord],
    *,
    sort_by: str | None = None,
    group_by: str | None = None,
    compare_by: str | None = None,
    highlight_best: bool = True,
    speedup_vs: str | None = None,
) -> str:
    """The records as text; see ``BenchmarkResult.print`` for the options."""
    _check_choice("sort_by", sort_by, SORT_KEYS)
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
        return "(no benchmark records)"

    speedup = _speedups(records, speedup_vs)
    best = _best(records) if highlight_best else set()
    order = list(range(len(records)))
    if sort_by is not None:
        order.sort(key=_sort_key(sort_by, records, speedup))
    groups: dict[Any, list[int]] = {}
    for i in order:
        groups.setdefault(None if group_by is None else getattr(records[i], group_by), []).append(i)

    sections = []
    for value, members in groups.items():
        table = (
            _long(records, members, group_by, best, speedup, speedup_vs)
            if compare_by is None
            else _wide(records, members, group_by, compare_by, best, speedup, speedup_vs)
        )
        sections.append(table if group_by is None else f"{group_by}: {value}\n{table}")
    text = "\n\n".join(sections)
    if best:
        text += "\n\n* fastest backend of the case"
    return text


def _long(
    records: Sequence[BenchmarkRecord],
    members: list[int],
    group_by: str | None,
    best: set[int],
    speedup: dict[int, float | None],
    speedup_vs: str | None,
) -> str:
    keys = [k for k in GROUP_KEYS if k != group_by]
    header = [*keys, "mean ms", "std ms", "min ms", "calls/s"]
    if speedup_vs is not None:
        header.append(f"vs {speedup_vs}")
    header.append("status")
    # Marked or not, the digits of a column line up.
    marked = bool(best.intersection(members))
    rows = []
    for i in members:
        r = records[i]
        row = [getattr(r, k) for k in keys]
        mark = (" *" if i in best else "  ") if marked else ""
        row += [format_ms(r.mean_ms) + mark, format_ms(r.std_ms), format_ms(r.min_ms)]
        row.append(format_rate(r.throughput))
        if speedup_vs is not None:
            s = speedup.get(i)
            row.append("-" if s is None else f"{s:.2f}x")
        row.append("ok" if r.success else _first_line(r.error or "failed"))
        rows.append(row)
    numeric = [False] * len(keys) + [True] * (len(header) - len(keys) - 1) + [False]
    return render(header, rows, numeric)


def _wide(
    records: Sequence[BenchmarkRecord],
    members: list[int],
    group_by: str | None,
    compare_by: str,
    best: set[int],
    speedup: dict[int, float | None],
    speedup_vs: str | None,
) -> str:
    keys = [k for k in GROUP_KEYS if k not in (group_by, compare_by)]
    columns = list(dict.fromkeys(getattr(records[i], compare_by) for i in members))
    cells: dict[tuple[Any, ...], dict[Any, int]] = {}
    for i in members:
        r = records[i]
        cells.setdefault(tuple(getattr(r, k) for k in keys), {})[getattr(r, compare_by)] = i
    name = (lambda v: str(v)) if compare_by == "backend" else (lambda v: f"{compare_by}={v}")
    header = [*keys] + [f"{name(v)} ms" for v in columns]
    with_speedup = [
        v
        for v in columns
        if speedup_vs is not None and not (compare_by == "backend" and v == speedup_vs)
    ]
    header += [f"{name(v)} vs {speedup_vs}" for v in with_speedup]
    # Columns holding a mark pad unmarked cells, so that the digits line up.
    marked = {
        getattr(records[i], compare_by) for i in members if i in best or not records[i].success
    }
    rows, notes = [], []
    for row_key, by_value in cells.items():
        row = list(row_key)
        for v in columns:
            i = by_value.get(v)
            if i is None:
                row.append("")
                continue
            r = records[i]
            cell = format_ms(r.mean_ms) if r.mean_ms is not None else "failed"
            if not r.success:
                cell += " !"
                where = ", ".join(f"{k} {getattr(r, k)}" for k in GROUP_KEYS)
                notes.append(f"! {where}: {_first_line(r.error or 'failed', 200)}")
            elif i in best:
                cell += " *"
            elif v in marked:
                cell += "  "
            row.append(cell)
        for v in with_speedup:
            i = by_value.get(v)
            s = None if i is None else speedup.get(i)
            row.append("-" if s is None else f"{s:.2f}x")
        rows.append(row)
    numeric = [False] * len(keys) + [True] * (len(header) - len(keys))
    table = render(header, rows, numeric)
    return "\n".join([table, *notes]) if notes else table
