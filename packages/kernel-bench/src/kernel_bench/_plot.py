"""A PNG chart of benchmark records: time per call of each backend on each case.

matplotlib is imported here only, when a plot is asked for, and drawn through
its Agg canvas without pyplot: no window, no global state.
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence

from ._record import BenchmarkRecord, quartiles, slower_beyond_noise

__all__ = ["plot_records"]


def _split(label: str) -> tuple[str, str]:
    kernel, sep, case = label.partition("/")
    return (kernel, case) if sep else (label, label)


def _format_ms(ms: float) -> str:
    if ms >= 1000:
        return f"{ms / 1000:.3g} s"
    if ms >= 1:
        return f"{ms:.3g} ms"
    if ms >= 1e-3:
        return f"{ms * 1e3:.3g} µs"
    return f"{ms * 1e6:.3g} ns"


def _measure(r: BenchmarkRecord) -> str:
    # In program where measured, else dispatch.
    return "program" if r.program_median_ms is not None else "dispatch"


def _bar(r: BenchmarkRecord) -> tuple[float | None, float | None, float | None]:
    return quartiles(r, _measure(r))


def plot_records(
    records: Sequence[BenchmarkRecord], path: pathlib.Path, *, title: str | None = None
) -> pathlib.Path:
    if not records:
        raise ValueError("cannot plot a benchmark result with no records")
    if path.suffix.lower() != ".png":
        raise ValueError(f"`path` must end in .png, got '{path}'")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, LogFormatter

    class _MinorLabels(LogFormatter):
        # matplotlib labels a few minor ticks where an axis spans less than a
        # decade or two; those labels in the same units as the major ones.
        def __call__(self, x: float, pos: int | None = None) -> str:
            return _format_ms(x) if super().__call__(x, pos) else ""

    panels: dict[str, dict[str, dict[str, BenchmarkRecord]]] = {}
    for r in records:
        kernel, case = _split(r.label)
        name = kernel if len({x.platform for x in records}) == 1 else f"{kernel} ({r.platform})"
        panels.setdefault(name, {}).setdefault(case, {})[r.backend] = r
    backends = list(dict.fromkeys(r.backend for r in records))
    colors = {b: f"C{i % 10}" for i, b in enumerate(backends)}
    heights = [len(cases) * (len(backends) * 0.28 + 0.35) + 0.9 for cases in panels.values()]

    fig = Figure(figsize=(9, sum(heights) + 0.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels), 1, squeeze=False, height_ratios=heights)[:, 0]
    bar = 0.8 / len(backends)
    for ax, (name, cases) in zip(axes, panels.items(), strict=True):
        timed = [m for c in cases.values() for r in c.values() if (m := _bar(r)[0])]
        low, high = (min(timed), max(timed)) if timed else (1e-3, 1.0)
        for y, by_backend in enumerate(cases.values()):
            ok = [r for r in by_backend.values() if r.success and _bar(r)[0]]
            fastest = min(ok, key=lambda r: _bar(r)[0]) if ok else None  # type: ignore[arg-type,return-value]
            for k, backend in enumerate(backends):
                record = by_backend.get(backend)
                if record is None:
                    continue
                pos = y + (k - (len(backends) - 1) / 2) * bar
                median, q25, q75 = _bar(record)
                if not median or not record.success:
                    note = "failed" if not median else f"{_format_ms(median)} (wrong result)"
                    ax.text(low, pos, f" {backend}: {note}", va="center", fontsize=8, color="red")
                    continue
                # The bar's error bar runs from the 25th to the 75th percentile:
                # never below zero on the log axis, and one outlier cannot stretch it.
                error = None
                if q25 is not None and q75 is not None:
                    error = [[max(median - q25, 0.0)], [max(q75 - median, 0.0)]]
                ax.barh(
                    pos,
                    median,
                    height=bar * 0.9,
                    color=colors[backend],
                    xerr=error,
                    error_kw={"elinewidth": 0.8, "capsize": 2},
                )
                best = (
                    fastest is not None
                    and len(ok) > 1
                    and not slower_beyond_noise(record, fastest, _measure(fastest))
                )
                right = max(median, q75 or 0.0)
                ax.text(
                    right * 1.08,
                    pos,
                    _format_ms(median),
                    va="center",
                    fontsize=8,
                    fontweight="bold" if best else "normal",
                )
        ax.set_xscale("log")
        ax.set_xlim(low / 3, high * 6 if timed else 10.0)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda ms, _: _format_ms(ms)))
        ax.xaxis.set_minor_formatter(_MinorLabels(labelOnlyBase=False))
        ax.set_yticks(range(len(cases)), list(cases))
        ax.set_ylim(len(cases) - 0.5, -0.5)
        ax.set_title(name, loc="left", fontsize=11)
        ax.grid(axis="x", which="both", alpha=0.25)
        ax.set_axisbelow(True)
    axes[-1].set_xlabel(
        "median time per call inside a compiled program (dispatch where not measured), log scale\n"
        "error bars: 25th to 75th percentile; bold: the fastest backend, and any as fast "
        "within the noise"
    )
    fig.legend(
        [Patch(color=colors[b]) for b in backends],
        backends,
        loc="outside upper right",
        ncols=min(len(backends), 6),
        title="backend",
        fontsize=9,
    )
    if title:
        fig.suptitle(title, x=0.02, ha="left")
    fig.savefig(path, dpi=110)
    return path
