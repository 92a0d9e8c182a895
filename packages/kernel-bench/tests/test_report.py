"""Printed tables and the comparison of two runs: exact text for known records."""

from __future__ import annotations

import re

import pytest
from kernel_bench import BenchmarkRecord, BenchmarkResult, compare


def whole(message: str) -> str:
    return "^" + re.escape(message) + "$"


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


def test_long_table(capsys):
    RESULT.print(speedup_vs="jax")
    assert capsys.readouterr().out == (
        "label     platform  backend  mean ms  std ms  min ms  calls/s  vs jax  status\n"
        "--------  --------  -------  -------  ------  ------  -------  ------  ---------------------------------\n"
        "add/n=8   cpu       jax          2       0.5       2      500   1.00x  ok\n"
        "add/n=8   cpu       numba      0.5 *     0.5     0.5    2,000   4.00x  ok\n"
        "add/n=8   cpu       bad          -         -       -        -       -  RuntimeError: boom\n"
        "add/n=64  cpu       jax          3 *     0.5       3      333   1.00x  ok\n"
        "add/n=64  cpu       numba        6       0.5       6      167   0.50x  ok\n"
        "add/n=64  cpu       bad          1       0.5       1    1,000   3.00x  result differs from backend 'jax'\n"
        "\n"
        "* fastest backend of the case\n"
    )


def test_wide_table_one_column_per_backend(capsys):
    RESULT.print(compare_by="backend", speedup_vs="jax", highlight_best=False)
    assert capsys.readouterr().out == (
        "label     platform  jax ms  numba ms    bad ms  numba vs jax  bad vs jax\n"
        "--------  --------  ------  --------  --------  ------------  ----------\n"
        "add/n=8   cpu            2       0.5  failed !         4.00x           -\n"
        "add/n=64  cpu            3         6       1 !         0.50x       3.00x\n"
        "! label add/n=8, platform cpu, backend bad: RuntimeError: boom\n"
        "! label add/n=64, platform cpu, backend bad: result differs from backend 'jax'\n"
    )


def test_grouped_and_sorted():
    text = RESULT.table(group_by="label", sort_by="mean_ms", highlight_best=False)
    sections = text.split("\n\n")
    assert [s.splitlines()[0] for s in sections] == ["label: add/n=8", "label: add/n=64"]
    rows = [line.split()[1] for line in sections[0].splitlines()[3:]]
    assert rows == ["numba", "jax", "bad"]  # failed last
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
        "label  platform=cpu ms  platform=gpu ms",
        "-----  ---------------  ---------------",
        "k/a                1 *           0.25 *",
    ]


def test_empty_result():
    assert BenchmarkResult().table() == "(no benchmark records)"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"sort_by": "speed"},
            "`sort_by` must be None or one of 'label', 'platform', 'backend', 'mean_ms', 'std_ms', 'min_ms', 'throughput', 'speedup', got 'speed'",
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
            {"sort_by": "speedup"},
            "`sort_by='speedup'` needs `speedup_vs`, the backend to compare with",
        ),
    ],
)
def test_table_errors(kwargs, message):
    with pytest.raises(ValueError, match=whole(message)):
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
    assert compare(old, new) == (
        "label  platform  backend  old ms  new ms        change\n"
        "-----  --------  -------  ------  ------  ------------\n"
        "k/a    cpu       jax           2       1  2.00x faster\n"
        "k/a    cpu       numba         1   1.001          same\n"
        "k/a    cpu       x             1  failed             -\n"
        "k/a    cpu       y        absent       3             -"
    )
    assert compare(new, old).splitlines()[2].endswith("2.00x slower")
    assert compare(BenchmarkResult(), BenchmarkResult()) == "(no benchmark records)"


def test_compare_refuses_non_results():
    with pytest.raises(
        TypeError, match=whole("`new` must be a BenchmarkResult, got <class 'list'>")
    ):
        compare(RESULT, [])
