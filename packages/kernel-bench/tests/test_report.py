"""Printed tables and the comparison of two runs: the columns and values shown for known records."""

from __future__ import annotations

import io
import re

import pytest
from ffi_core.testing import whole_message
from kernel_bench import BenchmarkRecord, BenchmarkResult, compare
from kernel_bench._console import print_table, render, report_renderables
from kernel_bench._record import slower_beyond_noise
from kernel_bench._report import BEST_MEANING, records_report
from rich.console import Console


def rec(backend, label, mean, *, success=True, error=None, platform="cpu"):
    timed = mean is not None
    return BenchmarkRecord(
        platform,
        backend,
        label,
        mean,
        0.5 if timed else None,
        mean if timed else None,
        1e3 / mean if timed else None,
        success,
        error,
    )


RESULT = BenchmarkResult(
    [
        rec("jax", "add/n=8", 2.0),
        rec("numba", "add/n=8", 0.5),
        rec("bad", "add/n=8", None, success=False, error="RuntimeError: boom\nmore"),
        rec("jax", "add/n=64", 3.0),
        rec("numba", "add/n=64", 6.0),
        rec("bad", "add/n=64", 1.0, success=False, error="result differs from backend 'jax'"),
    ]
)


def table_cells(text):
    """The rows of a plain table (the rule line dropped), each as its cells."""
    lines = [line for line in text.splitlines() if line.strip() and set(line) != {"─"}]
    return [re.split(r"  +", line.strip()) for line in lines]


def test_long_table(capsys):
    RESULT.print(speedup_vs="jax")
    out = capsys.readouterr().out
    assert table_cells(out)[:7] == [
        [
            *("label", "platform", "backend", "dispatch ms", "dispatch IQR", "dispatch min"),
            *("vs jax", "status"),
        ],
        ["add/n=8", "cpu", "jax", "2", "-", "2", "1.00x", "ok"],
        ["add/n=8", "cpu", "numba", "0.5 *", "-", "0.5", "4.00x", "ok"],
        ["add/n=8", "cpu", "bad", "-", "-", "-", "-", "RuntimeError: boom"],
        ["add/n=64", "cpu", "jax", "3 *", "-", "3", "1.00x", "ok"],
        ["add/n=64", "cpu", "numba", "6", "-", "6", "0.50x", "ok"],
        ["add/n=64", "cpu", "bad", "1", "-", "1", "3.00x", DIFFERS],
    ]
    assert out.endswith(f"\n\n* {BEST_MEANING}\n")
    assert all(line == line.rstrip() for line in out.splitlines())


def test_wide_table_one_column_per_backend(capsys):
    RESULT.print(compare_by="backend", speedup_vs="jax", highlight_best=False)
    assert table_cells(capsys.readouterr().out) == [
        [
            *("label", "platform", "jax dispatch ms", "numba dispatch ms", "bad dispatch ms"),
            *("numba vs jax", "bad vs jax"),
        ],
        ["add/n=8", "cpu", "2", "0.5", "failed !", "4.00x", "-"],
        ["add/n=64", "cpu", "3", "6", "1 !", "0.50x", "3.00x"],
        ["! label add/n=8, platform cpu, backend bad: RuntimeError: boom"],
        ["! label add/n=64, platform cpu, backend bad: " + DIFFERS],
    ]


def timed(backend, label, *, mean, median, program, q=0.1):
    """A record with dispatch and in-program statistics."""
    return BenchmarkRecord(
        "cpu", backend, label, mean, 1.0, median, 1e3 / mean, True,
        median_ms=median, q25_ms=median * 0.9, q75_ms=median * 1.1,
        program_median_ms=program, program_min_ms=program * 0.95,
        program_q25_ms=program * (1 - q), program_q75_ms=program * (1 + q),
        program_calls=100, rounds=10, noise=0.02,
    )  # fmt: skip


# numba's mean is dragged up by one outlier; its median (and in-program time) is
# 8x below jax's: the table ranks by the median in program, never by the mean.
OUTLIER = BenchmarkResult(
    [
        timed("numba", "csr/n=1", mean=1.463, median=0.04, program=0.036),
        timed("jax", "csr/n=1", mean=0.3, median=0.32, program=0.29),
    ]
)


def test_the_verdict_is_the_median_in_program_never_the_mean():
    assert OUTLIER.fastest("csr/n=1").backend == "numba"
    assert table_cells(OUTLIER.table(compare_by="backend", speedup_vs="jax")) == [
        ["label", "platform", "numba in program ms", "jax in program ms", "numba vs jax"],
        ["csr/n=1", "cpu", "0.036 *", "0.29", "8.06x"],
        [f"* {BEST_MEANING}"],
    ]
    dispatch = OUTLIER.table(compare_by="backend", speedup_vs="jax", measure="dispatch")
    assert table_cells(dispatch)[1] == ["csr/n=1", "cpu", "0.04 *", "0.32", "8.00x"]
    long = table_cells(OUTLIER.table())
    assert long[0] == [
        *("label", "platform", "backend", "in program ms", "in program IQR", "in program min"),
        *("dispatch ms", "dispatch IQR", "dispatch min", "status"),
    ]
    assert long[1] == [
        *("csr/n=1", "cpu", "numba", "0.036 *", "0.0072", "0.0342"),
        *("0.04", "0.008", "0.04", "ok"),
    ]


class Terminal(io.StringIO):
    def isatty(self):
        return True


ANSI = re.compile(r"\x1b\[[0-9;]*m")
GREEN = "\x1b[1;32m"
RED = "\x1b[31m"


def draw(width, records=RESULT.records, **options):
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, color_system="standard", width=width)
    for renderable in report_renderables(records_report(records, **options), width=width):
        console.print(renderable, crop=False)
    return stream.getvalue().splitlines()


def cells(line):
    return re.split(r"  +", ANSI.sub("", line).strip())


DIFFERS = "result differs from backend 'jax'"


def test_terminal_long_table():
    lines = draw(140, speedup_vs="jax")
    assert cells(lines[0]) == [
        *("label", "platform", "backend", "dispatch ms", "dispatch IQR", "dispatch min"),
        *("vs jax", "status"),
    ]
    assert set(ANSI.sub("", lines[1])) == {"─"}
    assert [cells(line) for line in lines[2:8]] == [
        ["add/n=8", "cpu", "jax", "2", "-", "2", "1.00x", "ok"],
        ["add/n=8", "cpu", "numba", "0.5", "-", "0.5", "4.00x", "ok"],
        ["add/n=8", "cpu", "bad", "-", "-", "-", "-", "RuntimeError: boom"],
        ["add/n=64", "cpu", "jax", "3", "-", "3", "1.00x", "ok"],
        ["add/n=64", "cpu", "numba", "6", "-", "6", "0.50x", "ok"],
        ["add/n=64", "cpu", "bad", "1", "-", "1", "3.00x", DIFFERS],
    ]
    # Colour marks the fastest backend of each case, instead of `*`; failures are red.
    assert re.search(re.escape(GREEN) + r" *0\.5\x1b", lines[3])
    assert re.search(re.escape(GREEN) + r" *3\x1b", lines[5])
    assert [i for i, line in enumerate(lines) if GREEN in line] == [3, 5, len(lines) - 1]
    assert f"{RED}RuntimeError: boom" in lines[4] and f"{RED}result differs" in lines[7]
    assert [i for i, line in enumerate(lines) if RED in line] == [4, 7]
    assert "*" not in "".join(lines)
    assert ANSI.sub("", lines[-1]) == BEST_MEANING


def test_every_backend_as_fast_within_the_noise_is_marked():
    # A verdict the rounds' spread could flip marks each backend it could go to:
    # medians within 5 %, or interquartile ranges overlapping (the rule the
    # consistency check applies to auto).
    records = [
        timed("a", "k/n=1", mean=1.0, median=1.0, program=1.0),  # fastest: 0.9 to 1.1
        timed("b", "k/n=1", mean=1.0, median=1.0, program=1.04),  # median within 5 %
        timed("c", "k/n=1", mean=1.0, median=1.0, program=1.3, q=0.2),  # from 1.04: overlaps
        timed("d", "k/n=1", mean=1.0, median=1.0, program=1.3),  # from 1.17: apart
        timed("e", "k/n=1", mean=1.0, median=2.0, program=1.3, q=0.2),  # as c; dispatch apart
    ]
    stars = {}
    for measure in ("program", "dispatch"):
        header, row = table_cells(
            BenchmarkResult(records).table(compare_by="backend", measure=measure)
        )[:2]
        stars[measure] = [
            h.split()[0] for h, cell in zip(header, row, strict=True) if cell.endswith("*")
        ]
    assert stars == {"program": ["a", "b", "c", "e"], "dispatch": ["a", "b", "c", "d"]}
    # Records without quartiles (older files): the medians alone decide.
    plain = [rec("a", "k/n=1", 1.0), rec("b", "k/n=1", 1.04), rec("c", "k/n=1", 1.3)]
    cells = table_cells(BenchmarkResult(plain).table())
    assert [row[2] for row in cells[1:4] if row[3].endswith("*")] == ["a", "b"]


def test_slower_beyond_noise_refuses_an_unknown_measure():
    a = rec("a", "k/n=1", 1.0)
    message = "`measure` must be 'program' or 'dispatch', got 'wall'"
    with pytest.raises(ValueError, match=whole_message(message)):
        slower_beyond_noise(a, a, "wall")


def test_terminal_table_fits_the_width():
    long_error = "ValueError: " + "the message goes on " * 8
    records = [*RESULT.records, rec("slow", "add/n=8", None, success=False, error=long_error)]
    text = [ANSI.sub("", line).rstrip() for line in draw(90, records)]
    assert max(map(len, text)) <= 90
    # The status column wraps the whole message instead of cutting it at 60 characters.
    at = text[0].index("status")
    status = " ".join(line[at:] for line in text[2:])
    assert long_error.strip() in " ".join(status.split())
    assert BenchmarkResult(records).table().count("...") == 1  # plain text cuts it


@pytest.mark.parametrize("width", [64, 40])
def test_terminal_table_wraps_headers_and_never_cuts_numbers(width):
    lines = [
        ANSI.sub("", line).rstrip() for line in draw(width, compare_by="backend", speedup_vs="jax")
    ]
    rows = [line.split() for line in lines if line.startswith("add/")]
    assert rows == [
        ["add/n=8", "cpu", "2", "0.5", "failed", "!", "4.00x", "-"],
        ["add/n=64", "cpu", "3", "6", "1", "!", "0.50x", "3.00x"],
    ]
    rule = next(i for i, line in enumerate(lines) if set(line) == {"─"})
    # The headers of numbers wrap at spaces ("numba vs jax" on two or three lines).
    assert rule > 1 and lines[rule - 1].split()[:2] == ["label", "platform"]
    assert lines[0].split()[0] == "jax"
    # 64 characters are enough once headers wrap; 40 are not: the table is then
    # drawn as narrow as its numbers allow, wider than asked, for the terminal to wrap.
    widest = max(map(len, lines[: rule + 3]))
    assert widest <= 64 if width == 64 else 40 < widest < 64


def test_terminal_wide_table():
    lines = draw(100, compare_by="backend", speedup_vs="jax")
    text = [ANSI.sub("", line).rstrip() for line in lines]
    assert text[0].split() == [
        *("label", "platform", "jax", "dispatch", "ms", "numba", "dispatch", "ms"),
        *("bad", "dispatch", "ms", "numba", "vs", "jax", "bad", "vs", "jax"),
    ]
    assert text[2].split() == ["add/n=8", "cpu", "2", "0.5", "failed", "!", "4.00x", "-"]
    assert text[3].split() == ["add/n=64", "cpu", "3", "6", "1", "!", "0.50x", "3.00x"]
    assert re.search(re.escape(GREEN) + r" *0\.5\x1b", lines[2])
    assert re.search(re.escape(GREEN) + r" *3\x1b", lines[3])
    assert re.search(re.escape(RED) + r" *failed !", lines[2])
    assert re.search(re.escape(RED) + r" *1 !", lines[3])
    assert text[4:6] == [
        "! label add/n=8, platform cpu, backend bad: RuntimeError: boom",
        "! label add/n=64, platform cpu, backend bad: result differs from backend 'jax'",
    ]
    assert all(line.startswith(RED) for line in lines[4:6])


def test_print_draws_on_a_terminal_only(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    terminal, pipe = Terminal(), io.StringIO()
    RESULT.print(speedup_vs="jax", file=terminal)
    RESULT.print(speedup_vs="jax", file=pipe)
    assert pipe.getvalue() == RESULT.table(speedup_vs="jax") + "\n"
    drawn = ANSI.sub("", terminal.getvalue())
    assert "─" in drawn and "---" not in drawn and " *" not in drawn
    assert drawn.splitlines()[0].split()[:3] == ["label", "platform", "backend"]
    assert drawn.rstrip().endswith(f"\n{BEST_MEANING}")


def test_print_table_of_strings():
    header, rows = ["kernel", "tags", "cpu"], [["add", "-", "numba*, jax"], ["mul", "x, y", "jax*"]]
    pipe, terminal = io.StringIO(), Terminal()
    print_table(header, rows, [False] * 3, file=pipe)
    print_table(header, rows, [False] * 3, file=terminal)
    assert pipe.getvalue() == render(header, rows, [False] * 3) + "\n"
    assert table_cells(pipe.getvalue()) == [header, *rows]
    drawn = [line.rstrip() for line in ANSI.sub("", terminal.getvalue()).splitlines()]
    assert [re.split(r"  +", line) for line in drawn[:1] + drawn[2:]] == [
        header,
        ["add", "-", "numba*, jax"],
        ["mul", "x, y", "jax*"],
    ]


def test_grouped_and_sorted():
    text = RESULT.table(group_by="label", sort_by="mean_ms", highlight_best=False)
    sections = text.split("\n\n")
    assert [s.splitlines()[0] for s in sections] == ["label: add/n=8", "label: add/n=64"]
    rows = [line.split()[1] for line in sections[0].splitlines()[3:]]
    assert rows == ["numba", "jax", "bad"]  # without a time: last
    rows = [line.split()[1] for line in sections[1].splitlines()[3:]]
    assert rows == ["bad", "jax", "numba"]


@pytest.mark.parametrize(
    ("sort_by", "order"),
    [
        ("throughput", ["numba", "bad", "jax", "jax", "numba", "bad"]),
        ("speedup", ["numba", "bad", "jax", "jax", "numba", "bad"]),
        ("backend", ["bad", "bad", "jax", "jax", "numba", "numba"]),
    ],
)
def test_sort_keys(sort_by, order):
    text = RESULT.table(sort_by=sort_by, speedup_vs="jax", highlight_best=False)
    assert [line.split()[2] for line in text.splitlines()[2:]] == order


def test_compare_by_platform_groups_by_backend():
    result = BenchmarkResult([rec("jax", "k/a", 1.0), rec("jax", "k/a", 0.25, platform="gpu")])
    text = result.table(compare_by="platform", group_by="backend")
    assert text.splitlines()[:4] == [
        "backend: jax",
        "label  platform=cpu dispatch ms  platform=gpu dispatch ms",
        "─" * 57,
        "k/a                         1 *                    0.25 *",
    ]


def test_empty_result():
    assert BenchmarkResult().table() == "(no benchmark records)"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"sort_by": "speed"},
            "`sort_by` must be None or one of 'label', 'platform', 'backend', 'time_ms', 'program_median_ms', 'median_ms', 'mean_ms', 'std_ms', 'min_ms', 'throughput', 'speedup', got 'speed'",
        ),
        (
            {"group_by": "mean_ms"},
            "`group_by` must be None or one of 'label', 'platform', 'backend', got 'mean_ms'",
        ),
        (
            {"compare_by": "x"},
            "`compare_by` must be None or one of 'label', 'platform', 'backend', got 'x'",
        ),
        (
            {"group_by": "backend", "compare_by": "backend"},
            "`group_by` and `compare_by` must differ, got 'backend' for both",
        ),
        (
            {"speedup_vs": "cuda"},
            "`speedup_vs` must be a backend of the records ('jax', 'numba', 'bad'), got 'cuda'",
        ),
        (
            {"measure": "mean"},
            "`measure` must be None or one of 'program', 'dispatch', got 'mean'",
        ),
        (
            {"sort_by": "speedup"},
            "`sort_by='speedup'` needs `speedup_vs`, the backend to compare with",
        ),
    ],
)
def test_table_errors(kwargs, message):
    with pytest.raises(ValueError, match=whole_message(message)):
        RESULT.print(**kwargs)


def test_compare_two_runs():
    old = BenchmarkResult([rec("jax", "k/a", 2.0), rec("numba", "k/a", 1.0), rec("x", "k/a", 1.0)])
    new = BenchmarkResult(
        [
            rec("jax", "k/a", 1.0),
            rec("numba", "k/a", 1.001),
            rec("y", "k/a", 3.0),
            rec("x", "k/a", None, success=False, error="E"),
        ]
    )
    assert table_cells(compare(old, new)) == [
        ["label", "platform", "backend", "old ms", "new ms", "change"],
        ["k/a", "cpu", "jax", "2", "1", "2.00x faster"],
        ["k/a", "cpu", "numba", "1", "1.001", "same"],
        ["k/a", "cpu", "x", "1", "failed", "-"],
        ["k/a", "cpu", "y", "absent", "3", "-"],
    ]
    assert compare(new, old).splitlines()[2].endswith("2.00x slower")
    assert compare(BenchmarkResult(), BenchmarkResult()) == "(no benchmark records)"


def test_compare_says_which_changes_are_within_the_noise():
    old = BenchmarkResult(
        [
            timed("a", "k/n=1", mean=1.0, median=1.0, program=1.0),
            timed("b", "k/n=1", mean=1.0, median=1.0, program=1.0),
            timed("c", "k/n=1", mean=1.0, median=1.0, program=1.0),
        ]
    )
    new = BenchmarkResult(
        [
            timed("a", "k/n=1", mean=1.0, median=1.0, program=1.04),  # median within 5 %
            timed("b", "k/n=1", mean=1.0, median=1.0, program=1.3, q=0.2),  # from 1.04: overlaps
            timed("c", "k/n=1", mean=1.0, median=1.0, program=1.3),  # from 1.17: apart
        ]
    )
    assert [row[-1] for row in table_cells(compare(old, new))[1:]] == [
        "1.04x slower, within the noise",
        "1.30x slower, within the noise",
        "1.30x slower",
    ]
    assert table_cells(compare(new, old))[3][-1] == "1.30x faster"


def test_compare_refuses_non_results():
    with pytest.raises(
        TypeError, match=whole_message("`new` must be a BenchmarkResult, got <class 'list'>")
    ):
        compare(RESULT, [])
