"""Records and results: fastest, dict/JSON/CSV round trips, the plot, refusals."""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest
from ffi_core.testing import whole_message
from kernel_bench import BenchmarkConfig, BenchmarkRecord, BenchmarkResult


def rec(backend, label="add/n=8", mean=1.0, *, success=True, error=None, **kw):
    timed = mean is not None
    return BenchmarkRecord(
        platform=kw.pop("platform", "cpu"),
        backend=backend,
        label=label,
        mean_ms=mean,
        std_ms=0.1 * mean if timed else None,
        min_ms=0.9 * mean if timed else None,
        throughput=1e3 / mean if timed else None,
        success=success,
        error=error,
        **kw,
    )


def sample() -> BenchmarkResult:
    return BenchmarkResult(
        [
            rec("jax", mean=2.0, kernel_kwargs={"shape": (4, 4), "dtype": jnp.float32}),
            rec("numba", mean=0.5, data_kwargs={"n": np.int64(8), "p": 0.01}),
            rec("bad", mean=None, success=False, error="RuntimeError: boom\nsecond line"),
            rec("wrong", mean=0.1, success=False, error="result differs from backend 'jax'"),
            rec("jax", label="add/n=64", mean=3.0),
            rec("numba", label="add/n=64", mean=4.0),
        ],
        metadata={"device": "cpu", "jax": "0"},
    )


def test_record_kwargs_become_json_data():
    r = sample().records[0]
    assert r.kernel_kwargs == {"shape": [4, 4], "dtype": "float32"}
    assert sample().records[1].data_kwargs == {"n": 8, "p": 0.01}
    assert type(sample().records[1].data_kwargs["n"]) is int


def test_fastest_skips_failed_and_mismatched_backends():
    result = sample()
    assert result.fastest("add/n=8").backend == "numba"
    assert result.fastest("add/n=64").backend == "jax"
    assert result.labels == ["add/n=8", "add/n=64"]


def test_fastest_errors():
    result = sample()
    with pytest.raises(
        ValueError,
        match=whole_message("no benchmark record has label 'x'; labels: 'add/n=8', 'add/n=64'"),
    ):
        result.fastest("x")
    failed = BenchmarkResult([rec("bad", mean=None, success=False, error="E")])
    with pytest.raises(
        ValueError, match=whole_message("every backend failed on 'add/n=8' (tried 'bad')")
    ):
        failed.fastest("add/n=8")


@pytest.mark.parametrize("suffix", [".json", ".csv", ".JSON"])
def test_save_load_round_trip(tmp_path, suffix):
    result = sample()
    path = result.save(tmp_path / f"r{suffix}")
    loaded = BenchmarkResult.load(path)
    assert loaded.records == result.records
    if suffix.lower() == ".json":
        assert loaded == result
        assert json.loads(path.read_text())["metadata"] == {"device": "cpu", "jax": "0"}


def test_csv_is_one_row_per_record(tmp_path):
    path = sample().save(tmp_path / "r.csv")
    lines = path.read_text().splitlines()
    # The first columns are those of every earlier version, in their order.
    assert lines[0] == (
        "platform,backend,label,mean_ms,std_ms,min_ms,throughput,success,error,"
        "kernel_kwargs,data_kwargs,median_ms,q25_ms,q75_ms,program_median_ms,program_min_ms,"
        "program_q25_ms,program_q75_ms,program_calls,rounds,noise,autotune"
    )
    assert len(lines) == 1 + 6 + 1  # one error message spans two lines, quoted


def test_to_dict_from_dict():
    result = sample()
    data = result.to_dict()
    assert set(data) == {"kernel_bench_version", "metadata", "records"}
    assert data["records"][2] == {
        "platform": "cpu",
        "backend": "bad",
        "label": "add/n=8",
        "mean_ms": None,
        "std_ms": None,
        "min_ms": None,
        "throughput": None,
        "success": False,
        "error": "RuntimeError: boom\nsecond line",
        "kernel_kwargs": {},
        "data_kwargs": {},
        **dict.fromkeys(
            ("median_ms", "q25_ms", "q75_ms", "program_median_ms", "program_min_ms"), None
        ),
        **dict.fromkeys(("program_q25_ms", "program_q75_ms", "program_calls", "rounds"), None),
        "noise": None,
        "autotune": None,
    }
    assert BenchmarkResult.from_dict(json.loads(json.dumps(data))) == result


def test_file_errors(tmp_path):
    with pytest.raises(
        ValueError,
        match=whole_message(
            f"`path` must end in one of .json, .csv (the file format), got '{tmp_path / 'r.txt'}'"
        ),
    ):
        sample().save(tmp_path / "r.txt")
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(
        ValueError,
        match=whole_message(
            f"'{bad}' is not a benchmark CSV file: its header must be platform,backend,label,"
            "mean_ms,std_ms,min_ms,throughput,success,error,kernel_kwargs,data_kwargs,median_ms,"
            "q25_ms,q75_ms,program_median_ms,program_min_ms,program_q25_ms,program_q75_ms,"
            "program_calls,rounds,noise,autotune, got a,b"
        ),
    ):
        BenchmarkResult.load(bad)
    not_result = tmp_path / "x.json"
    not_result.write_text("[1, 2]")
    with pytest.raises(
        ValueError,
        match=whole_message(
            "benchmark result data must be a dict with a 'records' list, as written by "
            "BenchmarkResult.to_dict, got <class 'list'>"
        ),
    ):
        BenchmarkResult.load(not_result)


def test_record_from_dict_refuses_unknown_fields():
    data = rec("jax").to_dict() | {"speed": 1}
    with pytest.raises(
        ValueError,
        match=whole_message(
            "benchmark record has unknown fields ['speed']; known: platform, backend, label, "
            "mean_ms, std_ms, min_ms, throughput, success, error, kernel_kwargs, data_kwargs, "
            "median_ms, q25_ms, q75_ms, program_median_ms, program_min_ms, program_q25_ms, "
            "program_q75_ms, program_calls, rounds, noise, autotune"
        ),
    ):
        BenchmarkRecord.from_dict(data)


def test_result_refuses_non_records():
    with pytest.raises(
        TypeError,
        match=whole_message("`records` entry 0 must be a BenchmarkRecord, got <class 'dict'>"),
    ):
        BenchmarkResult([{}])


def test_plot_writes_a_png(tmp_path):
    path = sample().plot(tmp_path / "plot.png", title="t")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    several = BenchmarkResult(
        [rec("jax", label=f"k{i}/n={n}", mean=float(n)) for i in range(3) for n in (1, 10)]
        + [rec("jax", label="nolabel", mean=1.0, platform="gpu")]
    )
    assert several.plot(tmp_path / "several.png").stat().st_size > 0


def test_plot_errors(tmp_path):
    with pytest.raises(
        ValueError, match=whole_message("cannot plot a benchmark result with no records")
    ):
        BenchmarkResult().plot(tmp_path / "p.png")
    with pytest.raises(
        ValueError, match=whole_message(f"`path` must end in .png, got '{tmp_path / 'p.jpg'}'")
    ):
        sample().plot(tmp_path / "p.jpg")


def test_config_keeps_its_fields():
    cfg = BenchmarkConfig("c", [jnp.ones(2)], kernel_kwargs={"k": 1}, data_kwargs={"n": 2})
    assert isinstance(cfg.args, tuple)
    assert cfg.kernel_kwargs == {"k": 1}
    assert cfg.data_kwargs == {"n": 2}


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (("", ()), {}, TypeError, "`name` must be a non-empty str, got ''"),
        (
            ("c", "xy"),
            {},
            TypeError,
            "`args` of benchmark case 'c' must be a tuple or list of the kernel's inputs, got <class 'str'>",
        ),
        (
            ("c", ()),
            {"kernel_kwargs": [1]},
            TypeError,
            "`kernel_kwargs` of benchmark case 'c' must be a dict, got <class 'list'>",
        ),
        (
            ("c", ()),
            {"data_kwargs": {1: 2}},
            TypeError,
            "`data_kwargs` of benchmark case 'c' must have str keys, got 1",
        ),
    ],
)
def test_config_errors(args, kwargs, error, message):
    with pytest.raises(error, match=whole_message(message)):
        BenchmarkConfig(*args, **kwargs)


def test_csv_of_an_earlier_version_still_loads(tmp_path):
    path = tmp_path / "old.csv"
    path.write_text(
        "platform,backend,label,mean_ms,std_ms,min_ms,throughput,success,error,"
        "kernel_kwargs,data_kwargs\n"
        "cpu,jax,add/n=8,2.0,0.5,1.5,500.0,True,,{},{}\n"
    )
    (record,) = BenchmarkResult.load(path).records
    assert (record.mean_ms, record.median_ms, record.program_median_ms) == (2.0, None, None)
    assert record.time_ms == 2.0  # the mean stands in where nothing else was measured


def test_csv_round_trips_the_new_fields(tmp_path):
    record = BenchmarkRecord(
        "cpu", "auto", "add/n=8", 2.0, 0.5, 1.5, 500.0, True,
        median_ms=1.9, q25_ms=1.8, q75_ms=2.1, program_median_ms=1.2, program_min_ms=1.1,
        program_q25_ms=1.15, program_q75_ms=1.3, program_calls=40, rounds=10, noise=0.03,
        autotune={"backend": "numba", "source": "measured", "margin": 1.5},
    )  # fmt: skip
    result = BenchmarkResult([record])
    assert BenchmarkResult.load(result.save(tmp_path / "r.csv")).records == [record]
    assert BenchmarkResult.load(result.save(tmp_path / "r.json")).records == [record]
    assert record.time_ms == 1.2


def test_plot_bars_are_medians_with_quartiles():
    from kernel_bench._plot import _bar

    program = BenchmarkRecord(
        "cpu", "numba", "k/n=1", 5.0, 9.0, 0.1, 200.0, True,
        median_ms=0.4, q25_ms=0.3, q75_ms=0.5,
        program_median_ms=0.2, program_q25_ms=0.15, program_q75_ms=0.25,
    )  # fmt: skip
    dispatch = BenchmarkRecord(
        "cpu", "numba", "k/n=1", 5.0, 9.0, 0.1, 200.0, True, median_ms=0.4, q25_ms=0.3, q75_ms=0.5
    )
    older = BenchmarkRecord("cpu", "numba", "k/n=1", 5.0, 9.0, 0.1, 200.0, True)
    assert _bar(program) == (0.2, 0.15, 0.25)
    assert _bar(dispatch) == (0.4, 0.3, 0.5)
    assert _bar(older) == (5.0, None, None)  # a file of an earlier version: no error bar
