"""The kernel-bench command, run through main([...])."""

from __future__ import annotations

import importlib.util
import io
import json
import re
import subprocess
import sys
import types

import jax
import kernel_bench
import numpy as np
import pytest
from ffi_core.testing import whole_message
from kernel_bench import BenchmarkConfig, BenchmarkRecord, BenchmarkResult, ProgressBar
from kernel_bench._cli import main
from xla_custom_kernel import XLACustomKernel

TAG = "kernel-bench-cli-test"
FAST = ["--n-runs", "1", "--n-warmup", "0", "--no-progress"]


def double(x):
    return x * 2


def cases():
    return [
        BenchmarkConfig(f"n={n}", (np.ones(n, np.float32),), data_kwargs={"n": n}) for n in (4, 8)
    ]


cli_double = XLACustomKernel("kernel_bench_cli_double")
cli_double.def_tags(TAG, "other-tag")
cli_double.def_jax_kernel(lambda outs, **kw: double)
cli_double.def_kernel("alt", "cpu", lambda outs, **kw: lambda x: x + x)
cli_double.def_call(lambda x: cli_double(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)))
cli_double.def_benchmark_data(lambda *, platform: cases())

cli_no_data = XLACustomKernel("kernel_bench_cli_no_data")
cli_no_data.def_tags(TAG)
cli_no_data.def_jax_kernel(lambda outs, **kw: double)


@pytest.fixture
def target_module(monkeypatch, fake_kernel):
    module = types.ModuleType("kernel_bench_cli_target")
    module.double = cli_double
    module.fakes = [
        fake_kernel("fake_ok", {"jax": double, "numba": double}, cases(), tags=("fake",)),
        fake_kernel("fake_bad", {"jax": double, "off": lambda x: x}, cases()),
    ]
    module.nested = types.SimpleNamespace(kernel=module.fakes[0])
    module.not_a_kernel = 3
    module.no_data = cli_no_data
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def test_help_documents_every_command(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for text in (
        "run",
        "list",
        "compare",
        "--quick",
        "--full",
        "--output-dir",
        "--platform",
        "--backends",
        "--n-runs",
        "--output",
        "--progress",
    ):
        assert text in out
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    for text in ("MODULE[:ATTR]", "--tags", "--speedup-vs", "--plot", "--n-runs", "--backends"):
        assert text in out


def test_help_does_not_import_jax():
    code = (
        "import sys, contextlib, io\n"
        "from kernel_bench._cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "print(sorted(m for m in ('jax', 'numba', 'rich') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"


def test_output_dir_still_works_with_a_deprecation_warning(tmp_path, monkeypatch, fake_kernel):
    suite = types.ModuleType("kernel_bench.examples")
    suite.set_scale = lambda scale: None
    suite.example_kernels = lambda: [fake_kernel("ex_a", {"jax": double}, cases())]
    monkeypatch.setitem(sys.modules, "kernel_bench.examples", suite)
    monkeypatch.setattr(kernel_bench, "examples", suite, raising=False)
    expected = tmp_path / "kernel-bench-results.json"
    with pytest.warns(
        FutureWarning,
        match=whole_message(
            "kernel-bench: --output-dir is deprecated and will be removed in the next release; "
            f"use --output {expected}"
        ),
    ):
        assert main(["--quick", "--n-runs", "1", "--no-plot", "--output-dir", str(tmp_path)]) == 0
    assert expected.is_file()


def test_compare_help_says_what_old_and_new_are(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "OLD the baseline: the earlier run's file" in out
    assert "NEW the run to compare with the baseline" in out
    assert "written by `kernel-bench --output FILE`" in out


class _Load:
    # Other processes' load as measured over the in-program rounds.
    def share(self):
        return 0.123


def test_run_user_kernel_writes_records_and_plot(tmp_path, capsys, monkeypatch, target_module):
    monkeypatch.setattr("kernel_bench._suite_cli.OtherLoad", _Load)
    # Every CPU usable, as in a process nothing pinned.
    monkeypatch.setattr("kernel_bench._kernel.os.cpu_count", lambda: 4)
    monkeypatch.setattr("kernel_bench._kernel.usable_cpus", lambda: (0, 1, 2, 3))
    latency = tmp_path / "cpu_dma_latency"  # stands in for Linux's request file
    latency.write_bytes(b"\xff" * 4)
    monkeypatch.setattr("kernel_bench._awake.LATENCY_FILE", str(latency))
    out, png = tmp_path / "r.json", tmp_path / "r.png"
    code = main(
        [
            "run",
            "kernel_bench_cli_target:double",
            *FAST,
            "--speedup-vs",
            "jax",
            "--output",
            str(out),
            "--plot",
            str(png),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].startswith("time per call inside a compiled program (median ms over 1 rounds")
    assert lines[1].split() == [
        *("label", "platform", "jax", "in", "program", "ms", "alt", "in", "program", "ms"),
        *("alt", "vs", "jax"),
    ]
    dispatch = lines.index(
        "time per call as a lone dispatch (median ms over 1 runs of one jitted call):"
    )
    assert lines[dispatch + 1].split() == [
        *("label", "platform", "jax", "dispatch", "ms", "alt", "dispatch", "ms"),
    ]
    assert "kernel_bench_cli_double/n=4" in text and "kernel_bench_cli_double/n=8" in text
    assert f"records: {out}" in text and f"plot: {png}" in text
    result = BenchmarkResult.load(out)
    assert [(r.label, r.backend) for r in result.records] == [
        (f"kernel_bench_cli_double/n={n}", b) for n in (4, 8) for b in ("jax", "alt")
    ]
    assert result.metadata["n_runs"] == 1
    assert result.metadata["other_load"] == 0.123
    (noise,) = [line for line in lines if line.startswith("machine noise:")]
    held = f"idle CPUs kept awake (a wake-up latency request of 0 us held through {latency})"
    assert noise.endswith(
        f"; other processes used 12.3% of the CPUs meanwhile; {held}; the reference op ran at "
        "least 1.1x its case's median in 0% of its runs"
    )
    assert result.metadata["cpu_idle"] == held
    assert (result.metadata["cpu_count"], result.metadata["cpus"]) == (4, [0, 1, 2, 3])
    # One round a case: each run is its series' median, none slow, and the
    # backends' runs beside the reference op's at their medians.
    assert result.metadata["slow_stretches"] == {
        "reference_runs": 2,
        "slow_runs": 0,
        "beside_slow": None,
        "beside_others": 1.0,
    }
    assert latency.read_bytes() == b"\x00" * 4
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("cpus", "clause"), [((1,), "CPU 1"), ((0, 2), "CPUs 0, 2")])
def test_a_run_pinned_to_fewer_cpus_says_so(tmp_path, capsys, monkeypatch, cpus, clause):
    # Pinned by taskset or a cpuset: the threaded backends had those CPUs alone.
    monkeypatch.setattr("kernel_bench._kernel.os.cpu_count", lambda: 4)
    monkeypatch.setattr("kernel_bench._kernel.usable_cpus", lambda: cpus)
    out = tmp_path / "r.json"
    argv = ["run", "kernel_bench_cli_target:double", *FAST, "--output", str(out), "--no-plot"]
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "kernel_bench_cli_target", types.SimpleNamespace(double=cli_double))
        assert main(argv) == 0
    (noise,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("machine noise:")]
    assert noise.endswith(f"; run on {clause} of the machine's 4 (the process's affinity)")
    assert BenchmarkResult.load(out).metadata["cpus"] == list(cpus)


def test_no_keep_cpus_awake_leaves_the_request_file_alone(tmp_path, capsys, monkeypatch):
    latency = tmp_path / "cpu_dma_latency"
    latency.write_bytes(b"\xff" * 4)
    monkeypatch.setattr("kernel_bench._awake.LATENCY_FILE", str(latency))
    out = tmp_path / "r.json"
    argv = ["run", "kernel_bench_cli_target:double", *FAST, "--output", str(out), "--no-plot"]
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "kernel_bench_cli_target", types.SimpleNamespace(double=cli_double))
        assert main([*argv, "--no-keep-cpus-awake"]) == 0
    assert latency.read_bytes() == b"\xff" * 4
    assert BenchmarkResult.load(out).metadata["cpu_idle"] == (
        "idle CPUs not kept awake (--no-keep-cpus-awake)"
    )
    assert "; idle CPUs not kept awake (--no-keep-cpus-awake);" in capsys.readouterr().out


def test_run_module_with_tags_and_backends(capsys, target_module):
    code = main(["run", "kernel_bench_cli_target", "--tags", TAG, "--backends", "alt", *FAST])
    assert code == 0
    captured = capsys.readouterr()
    assert "kernel-bench: skipping 'kernel_bench_cli_no_data': no benchmark data" in captured.err
    rows = captured.out.splitlines()[3:5]
    assert [r.split()[0] for r in rows] == [
        "kernel_bench_cli_double/n=4",
        "kernel_bench_cli_double/n=8",
    ]
    assert "jax" not in captured.out.splitlines()[1]


def test_a_bare_module_names_its_own_kernels(target_module):
    import argparse

    from kernel_bench._cli_common import resolve

    # Kernels its code (or a submodule's) creates, held in its namespace or not,
    # and kernels its namespace holds; not every kernel of the process.
    code = "from xla_custom_kernel import XLACustomKernel\nmade = XLACustomKernel(NAME)\n"
    for name, where in [
        ("kernel_bench_cli_made_in_module", target_module.__name__),
        ("kernel_bench_cli_made_in_submodule", target_module.__name__ + ".sub"),
        ("kernel_bench_cli_made_elsewhere", "kernel_bench_cli_targetless"),
    ]:
        exec(code, {"__name__": where, "NAME": name})
    names = [k.name for k in resolve(argparse.ArgumentParser(), target_module.__name__, None)]
    assert names == [
        "kernel_bench_cli_double",
        "kernel_bench_cli_no_data",
        "kernel_bench_cli_made_in_module",
        "kernel_bench_cli_made_in_submodule",
    ]


def test_run_list_attribute_and_failures(tmp_path, capsys, target_module):
    out = tmp_path / "r.csv"
    code = main(
        [
            "run",
            "kernel_bench_cli_target:fakes",
            "kernel_bench_cli_target:nested.kernel",
            *FAST,
            "--output",
            str(out),
        ]
    )
    assert code == 1
    captured = capsys.readouterr()
    assert "kernel-bench: 2 of 8 runs failed" in captured.err
    assert (
        "! label fake_bad/n=4, platform cpu, backend off: result differs from backend 'jax'"
        in captured.out
    )
    assert len(BenchmarkResult.load(out).records) == 8  # fake_ok once, though named twice


def test_run_with_tags_on_explicit_kernels(capsys, target_module):
    assert main(["run", "kernel_bench_cli_target:fakes", "--tags", "fake", *FAST]) == 0
    assert "fake_bad" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["run", "no_such_module_xyz"],
            "cannot import module 'no_such_module_xyz': ModuleNotFoundError: No module named "
            "'no_such_module_xyz'",
        ),
        (
            ["run", "kernel_bench_cli_target:missing"],
            "module 'kernel_bench_cli_target' has no attribute 'missing'",
        ),
        (
            ["run", "kernel_bench_cli_target:not_a_kernel"],
            "'kernel_bench_cli_target:not_a_kernel' must be an XLACustomKernel or a list of them, got 3",
        ),
        (
            ["run", "kernel_bench_cli_target:fakes", "--tags", "nope"],
            "no kernel matches kernel_bench_cli_target:fakes with tags nope",
        ),
        (
            ["run", "kernel_bench_cli_target:double", "--output", "r.txt"],
            "--output must end in .json or .csv, got 'r.txt'",
        ),
        (
            ["run", "kernel_bench_cli_target:double", "--plot", "r.svg"],
            "--plot must end in .png, got 'r.svg'",
        ),
        (
            ["run", "kernel_bench_cli_target:double", "--speedup-vs", "cuda", *FAST],
            "--speedup-vs cuda: no kernel ran a backend of that name",
        ),
        (
            ["run", "kernel_bench_cli_target:double", "--n-runs", "0"],
            "--n-runs must be at least 1, got 0",
        ),
        (
            ["run", "kernel_bench_cli_target:double", "--n-batch", "0"],
            "--n-batch must be at least 1, got 0",
        ),
        (
            ["run", "kernel_bench_cli_target:double", "--n-warmup", "-1"],
            "--n-warmup must be at least 0, got -1",
        ),
        (["--quick", "--full"], "argument --full: not allowed with argument --quick"),
        (["--output", "x.png"], "--output must end in .json or .csv, got 'x.png'"),
        (
            ["list", "no_such_module_xyz"],
            "cannot import module 'no_such_module_xyz': ModuleNotFoundError: No module named "
            "'no_such_module_xyz'",
        ),
        (
            ["--backends", "jax", "run", "kernel_bench_cli_target:double"],
            "--backends took the command 'run' as a backend's name; put the command first "
            "(kernel-bench run ... --backends B ...)",
        ),
        (
            ["run", "kernel_bench_cli_target:fakes", "--backends", "jax", "nosuch"],
            "--backends: 'nosuch' is no backend of the kernels on cpu; they have auto, jax, numba, off",
        ),
    ],
)
def test_usage_errors(capsys, target_module, argv, message):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.fullmatch(r"kernel-bench( run| list)?: error: " + re.escape(message), last), last


def test_list_shows_tags_backends_and_data(capsys, target_module):
    assert main(["list", "kernel_bench_cli_target", "--tags", TAG]) == 0
    out = capsys.readouterr().out
    assert [re.split(r"  +", line) for line in out.splitlines() if "─" not in line] == [
        ["kernel", "tags", "cpu", "gpu", "tpu", "benchmark data"],
        [
            *("kernel_bench_cli_double", "kernel-bench-cli-test, other-tag", "jax*, alt"),
            *("jax*", "jax*", "yes"),
        ],
        ["kernel_bench_cli_no_data", "kernel-bench-cli-test", "jax*", "jax*", "jax*", "no"],
        [""],
        ["* default backend of the platform"],
    ]
    assert main(["list", "--tags", "no-such-tag"]) == 0
    assert capsys.readouterr().out == "no kernels in kernel_bench.examples with tags no-such-tag\n"


EXAMPLES = ("axpy", "exp_trace", "lif_step", "csr_matvec", "csr_matmat")


def test_list_defaults_to_the_bundled_examples(capsys):
    assert main(["list", "--tags", "example"]) == 0
    out = capsys.readouterr().out
    for name in EXAMPLES:
        assert re.search(rf"^kernel_bench\.examples\.{name} .*numba.*jax", out, re.M), out


def test_compare_two_files(tmp_path, capsys):
    def result(ms):
        return BenchmarkResult(
            [BenchmarkRecord("cpu", "numba", "k/a", ms, 0.0, ms, 1e3 / ms, True)]
        )

    old = result(2.0).save(tmp_path / "old.json")
    new = result(1.0).save(tmp_path / "new.csv")
    assert main(["compare", str(old), str(new)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split() == [
        "k/a",
        "cpu",
        "numba",
        "2",
        "1",
        "2.00x",
        "faster",
    ]
    with pytest.raises(SystemExit):
        main(["compare", str(old), str(tmp_path / "missing.json")])
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "text.json").write_text("not json")
    (tmp_path / "ints.json").write_text('{"records": [1]}')
    for name, reason in (
        ("text.json", "is not a JSON file: Expecting value: line 1 column 1 (char 0)"),
        ("ints.json", "a benchmark record must be a dict of its fields, got 1"),
    ):
        with pytest.raises(SystemExit):
            main(["compare", str(old), str(tmp_path / name)])
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last.startswith(f"kernel-bench: error: cannot read '{tmp_path / name}': "), last
        assert last.endswith(reason), last


def test_suite_sets_scale_and_writes_files(tmp_path, capsys, monkeypatch, fake_kernel):
    scales = []
    suite = types.ModuleType("kernel_bench.examples")
    suite.set_scale = scales.append
    suite.example_kernels = lambda: [
        fake_kernel("ex_a", {"numba": double, "jax": double}, cases()),
        fake_kernel("ex_gpu_only", {"jax": double}, cases(), platform="gpu"),
    ]
    monkeypatch.setitem(sys.modules, "kernel_bench.examples", suite)
    monkeypatch.setattr(kernel_bench, "examples", suite, raising=False)
    argv = ["--full", "--platform", "cpu", "--no-autotune", *FAST]
    assert main([*argv, "--output", str(tmp_path / "out" / "kernel-bench-results.json")]) == 0
    assert scales == ["full"]
    captured = capsys.readouterr()
    assert "kernel-bench: skipping 'ex_gpu_only': no backend for platform 'cpu'" in captured.err
    header = captured.out.splitlines()[1].split()
    assert header[-3:] == ["numba", "vs", "jax"]
    saved = json.loads((tmp_path / "out" / "kernel-bench-results.json").read_text())
    assert saved["metadata"]["scale"] == "full"
    assert (tmp_path / "out" / "kernel-bench-results.png").is_file()


def test_suite_progress_bar_on_request(tmp_path, capsys, monkeypatch, fake_kernel):
    suite = types.ModuleType("kernel_bench.examples")
    suite.set_scale = lambda scale: None
    suite.example_kernels = lambda: [fake_kernel("ex_a", {"jax": double}, cases())]
    monkeypatch.setitem(sys.modules, "kernel_bench.examples", suite)
    monkeypatch.setattr(kernel_bench, "examples", suite, raising=False)
    out = tmp_path / "r.json"
    assert main(["--quick", "--progress", "--n-runs", "1", "--output", str(out), "--no-plot"]) == 0
    err = capsys.readouterr().err.splitlines()
    # Each kernel's cases, then the in-program rounds of all of them.
    assert re.fullmatch(r"1/1 ex_a 0/2 \d+\.\ds ex_a/n=4 jax", err[0]), err
    assert re.fullmatch(r"1/1 ex_a 1/2 \d+\.\ds ex_a/n=8 jax", err[1]), err
    assert re.fullmatch(r"1/1 ex_a 2/2 \d+\.\ds done", err[2]), err
    assert re.fullmatch(r"0/2 \d+\.\ds in program, pass 1 of 1", err[3]), err
    assert re.fullmatch(r"2/2 \d+\.\ds done", err[-1]), err
    assert out.is_file() and not out.with_suffix(".png").exists()


def test_bundled_suite_runs(tmp_path, capsys):
    code = main(
        [
            "--quick",
            "--platform",
            "cpu",
            *FAST,
            "--output",
            str(tmp_path / "kernel-bench-results.json"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    result = BenchmarkResult.load(tmp_path / "kernel-bench-results.json")
    kernels = {r.label.split("/")[0] for r in result.records}
    assert kernels == {f"kernel_bench.examples.{n}" for n in EXAMPLES}
    backends = {r.backend for r in result.records}
    assert backends >= {"numba", "jax", "auto"}
    assert ("warp" in backends) == (importlib.util.find_spec("warp_ffi") is not None)
    # Warp prints its banner to standard output when it starts, before the table.
    assert "numba vs jax" in next(line for line in out.splitlines() if line.startswith("label"))
    # The table ends with the backend "auto" picked for each operation and shape.
    choices = out.split("autotuned backends (", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert choices[0].split()[:4] == ["operation", "call", "signature", "auto"]
    picked = {line.split()[0]: line for line in choices[2:] if line.strip()}
    assert set(picked) >= {f"kernel_bench.examples.{n}" for n in EXAMPLES}
    assert all(" measured " in line for line in picked.values()), out
    assert set(picked) == {f"kernel_bench.examples.{n}" for n in EXAMPLES}
    # The consistency check closes the report; it never changes the exit status.
    assert re.search(
        r'^consistency: "auto" against the fastest fixed backend, in program, in 5 cases: ',
        out,
        re.M,
    ), out
    assert result.metadata["consistency"]["compared"] == 5
    assert all(r.program_median_ms is not None for r in result.records if r.success)


class Terminal(io.StringIO):
    def isatty(self):
        return True


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def color_terminal(monkeypatch):
    # rich decides from the environment how much a terminal can show.
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "120")
    for name in ("NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)


def test_progress_bar_draws_with_rich_on_a_terminal(color_terminal):
    stream = Terminal()
    bar = ProgressBar(stream, width=8)
    bar.prefix = "k "
    streams = (sys.stdout, sys.stderr)
    bar(0, 2, "first step")
    assert (sys.stdout, sys.stderr) == streams
    bar(1, 2, "second [step]")
    bar(2, 2, "done")
    bar(0, 1, "again")
    bar(1, 1, "done")
    raw = stream.getvalue()
    # Bar, steps, time elapsed and left, the step (the times are the machine's).
    frames = [re.sub(r"\d:\d\d:\d\d|-:--:--", "T", ANSI.sub("", f)) for f in raw.split("\r")]
    # Redrawn in place at each step; each run ends on its own line, the cursor shown.
    assert frames == [
        "━━━━━━━━ 0/2 T eta T k first step",
        "━━━━╺━━━ 1/2 T eta T k second [step]",
        "━━━━━━━━ 2/2 T eta T k done",
        "━━━━━━━━ 2/2 T eta T k done\n━━━━━━━━ 0/1 T eta T k again",
        "━━━━━━━━ 1/1 T eta T k done",
        "━━━━━━━━ 1/1 T eta T k done\n",
    ]
    assert raw.endswith("\n\x1b[?25h")
    assert (sys.stdout, sys.stderr) == streams


def test_progress_bar_stopped_midway_leaves_the_cursor_shown(color_terminal):
    stream = Terminal()
    bar = ProgressBar(stream)
    bar(0, 3, "a")
    bar(1, 3, "b")
    cursor = re.findall(r"\x1b\[\?25([hl])", stream.getvalue())
    assert cursor[-1] == "h"


def test_progress_bar_writes_lines_elsewhere():
    stream = io.StringIO()
    bar = ProgressBar(stream, width=4)
    bar(1, 4, "x")
    bar(4, 4, "done")
    lines = [re.sub(r" \d+\.\ds ", " T ", line) for line in stream.getvalue().splitlines()]
    assert lines == ["1/4 T x", "4/4 T done"]


def test_devices_runs_kernels_with_a_sharding_rule_on_a_mesh(capsys):
    # The workspace conftest gives four CPU devices.
    code = main(
        ["run", "kernel_bench.examples:exp_trace", "--devices", "4", "--backends", "numba", *FAST]
    )
    assert code == 0
    out = capsys.readouterr().out
    sharded = out.split("sharded over 4 CPU devices (kernels with a sharding rule):")[1]
    rows = [
        line for line in sharded.splitlines() if line.startswith("kernel_bench.examples.exp_trace/")
    ]
    assert rows and all(re.search(r"\(25%\)\s+no$", row) for row in rows), sharded


def test_devices_beyond_those_jax_has_are_refused(capsys):
    with pytest.raises(SystemExit):
        main(["run", "kernel_bench.examples:exp_trace", "--devices", "64", *FAST])
    assert (
        "--devices 64: JAX has 4 CPU devices; start the command with "
        "XLA_FLAGS=--xla_force_host_platform_device_count=64"
    ) in capsys.readouterr().err


def test_run_output_writes_the_plot_beside_the_records(tmp_path, capsys, target_module):
    out = tmp_path / "bench" / "mine.json"
    assert main(["run", "kernel_bench_cli_target:double", *FAST, "--output", str(out)]) == 0
    text = capsys.readouterr().out
    png = tmp_path / "bench" / "mine.png"
    assert f"records: {out}" in text and f"plot: {png}" in text
    assert png.read_bytes()[:4] == b"\x89PNG"
    other = tmp_path / "other.json"
    argv = ["run", "kernel_bench_cli_target:double", *FAST, "--output", str(other), "--no-plot"]
    assert main(argv) == 0
    assert other.is_file() and not other.with_suffix(".png").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "kernel_bench_cli_broken:op"],
        ["check", "kernel_bench_cli_broken:op"],
        ["autotune", "run", "kernel_bench_cli_broken:op"],
        ["list", "kernel_bench_cli_broken"],
    ],
)
def test_a_module_that_fails_to_import_is_one_line(tmp_path, monkeypatch, capsys, argv):
    (tmp_path / "kernel_bench_cli_broken.py").write_text(
        'raise RuntimeError("mylib needs its data files\\nsee the docs")\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "kernel-bench: error: cannot import module 'kernel_bench_cli_broken': RuntimeError: "
        "mylib needs its data files"
    )


def test_options_given_before_run_are_kept():
    from kernel_bench._cli import build_parser

    parser = build_parser()
    before = ["--n-runs", "5", "--output", "x.json", "--quick", "--no-plot", "-v", "--no-progress"]
    args = parser.parse_args([*before, "run", "m"])
    assert (args.n_runs, str(args.output), args.scale, args.no_plot, args.verbose) == (
        5,
        "x.json",
        "quick",
        True,
        True,
    )
    assert args.progress is False and args.targets == ["m"]
    args = parser.parse_args(["--platform", "cpu", "--quick", "autotune", "run", "axpy"])
    assert (args.platform, args.scale) == ("cpu", "quick")
    args = parser.parse_args(["autotune", "run", "axpy"])
    assert (args.platform, args.scale) == (None, "default")
    # Given after `run`, they win; not given at all, the defaults hold.
    assert parser.parse_args(["--n-runs", "5", "run", "m", "--n-runs", "7"]).n_runs == 7
    args = parser.parse_args(["run", "m"])
    assert (args.n_runs, args.output, args.scale, args.no_plot, args.n_batch) == (
        None,
        None,
        "default",
        False,
        1,
    )


def test_an_output_that_cannot_be_written_is_refused_before_timing(tmp_path, capsys, target_module):
    (tmp_path / "a_file").write_text("")
    output = tmp_path / "a_file" / "r.json"
    with pytest.raises(SystemExit) as info:
        main(["run", "kernel_bench_cli_target:double", "--output", str(output)])
    assert info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"kernel-bench: error: --output {output}: {output.parent} is not a folder"
    )


@pytest.mark.skipif(
    any(d.platform == "gpu" for d in jax.devices()) or jax.default_backend() != "cpu",
    reason="a GPU is present",
)
def test_a_platform_jax_does_not_have_is_a_usage_error(capsys, target_module):
    with pytest.raises(SystemExit) as info:
        main(["run", "kernel_bench_cli_target:double", "--platform", "gpu"])
    assert info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "kernel-bench: error: --platform gpu: JAX has no gpu device here (it has cpu)"
    )
