"""The scripts in tools/ still run: the benchmarks that reach into private
internals (a short run: the figures themselves come from full runs, never from
tests) and the GPU check's driver where there is no GPU."""

import json
import os
import pathlib
import re
import subprocess
import sys
import threading

import pytest

TOOLS = pathlib.Path(__file__).resolve().parents[1] / "tools"


def _bench_launch_host(*args):
    command = [sys.executable, str(TOOLS / "bench_launch_host.py"), "--calls", "20"]
    command += ["--repeats", "1", *args]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600).stdout
    lines = out.splitlines()
    assert lines[0].startswith("20 chained calls of x + y (float32[256]) in one jit, median of 1")
    assert lines[1].split() == ["bridge", "us/call", "x", "noop", "what", "runs"]
    return [line.split()[0] for line in lines[2:]]


def test_bench_launch_host_runs_every_bridge():
    # Every row, the GPU bridges through the launcher with a no-op launch (the
    # tool raises unless each call launched once); and a chosen order.
    assert _bench_launch_host() == [
        "numba-cuda",
        "triton",
        "cuda-source",
        "warp",
        "numba-cpu",
        "noop",
        "noop-attr",
        "pure-callback",
        "jnp",
    ]
    assert _bench_launch_host("--bridges", "jnp,triton") == ["jnp", "triton"]


def _gpu_check_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", TOOLS / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_check_finds_every_check_script_and_says_when_there_is_no_gpu():
    gpu_check = _gpu_check_module()
    assert [pathlib.Path(p).name for p in gpu_check.scripts()] == sorted(
        p.name for p in TOOLS.glob("gpu_check_*.py")
    )
    proc = subprocess.run(
        [sys.executable, str(TOOLS / "gpu_check.py")],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "numba_cuda     GPU" in proc.stdout
    assert "bridges        GPU" in proc.stdout
    assert proc.stdout.strip().endswith("summary: no GPU found by any check (nothing verified)")


def test_gpu_check_bridges_correctness_on_the_emulated_gpu():
    # The GPU check of triton-ffi, cuda-source-ffi and warp-ffi's GPU path runs its
    # correctness part on ffi-core's emulated GPU (two CPU devices stand in for two
    # GPUs): its kernels, ops and reference results, checked without a GPU.
    import pytest

    for module in ("triton", "warp_ffi", "cuda_source_ffi"):
        pytest.importorskip(module)
    command = [sys.executable, str(TOOLS / "gpu_check_bridges.py"), "--emulated"]
    # Most of the run is Numba compiling the launcher's handlers (one per kernel
    # signature); Numba's markup (colorama) of the message of every typing
    # attempt that fails on the way is some 5% of it, left out.
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING": "1"}
    proc = subprocess.run(
        [*command, "--only", "correctness"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env=env,
    )
    rows = _gpu_check_module().parse(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    statuses = {row["name"]: row["status"] for row in rows}
    assert statuses.pop("versions") == "info"
    checks = ["jit, scalar parameter", "vmap", "scan", "aliases"]
    expected = {f"{bridge}: {name}" for bridge in ("triton", "warp") for name in checks}
    expected |= {f"cuda-source: {name}" for name in ["jit, scalar parameters", *checks[1:]]}
    expected |= {"triton: grid callable", "cuda-source: launch_dims callable"}
    expected |= {"warp: 2-d launch", "warp: generic (Any) kernel"}
    expected |= {"warp: grad vs jnp (float64)", "warp: check_grads (float64)"}
    expected |= {f"device 1: {bridge}" for bridge in ("triton", "cuda-source", "warp")}
    assert statuses == dict.fromkeys(expected, "pass")


def test_gpu_check_table_and_statuses():
    gpu_check = _gpu_check_module()
    rows = gpu_check.parse(
        'noise\nCHECK {"name": "a", "status": "pass", "detail": "fine"}\n'
        'CHECK {"name": "b", "status": "MISS", "detail": "1.2x (goal <= 1.1x)"}\nCHECK {bad\n'
    )
    assert [(r["name"], r["status"]) for r in rows] == [
        ("a", "pass"),
        ("b", "MISS"),
        ("(unreadable CHECK line)", "FAIL"),
    ]
    text = gpu_check.table([("numba_cuda", r) for r in rows])
    assert text.splitlines()[2].split() == ["numba_cuda", "a", "pass", "fine"]


def test_bench_warp_cpu_runs(tmp_path):
    import json

    import pytest

    pytest.importorskip("warp_ffi")
    out = tmp_path / "warp.json"
    command = [sys.executable, str(TOOLS / "bench_warp_cpu.py"), "--rounds", "1"]
    command += ["--only", "tiny", "chain", "--json", str(out)]
    subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
    results = json.loads(out.read_text())
    assert set(results) == {"tiny", "chain", "machine"}
    assert {"ratio_warp_over_jnp"} <= set(results["tiny"])
    assert {"warp_per_call_us", "noop_per_call_us", "ratio_per_call_warp_over_noop"} <= set(
        results["chain"]
    )


def test_bench_autotune_runs():
    import json

    command = [sys.executable, str(TOOLS / "bench_autotune.py"), "--quick", "--json"]
    command += ["--rounds", "1", "--run-seconds", "0.002"]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=900)
    results = json.loads(done.stdout)
    suite = results["suite"]
    cases = {c["case"].split("/")[0] for c in suite["cases"]}
    assert cases == {
        f"kernel_bench.examples.{n}"
        for n in ("axpy", "exp_trace", "lif_step", "csr_matvec", "csr_matmat")
    }
    for c in suite["cases"]:
        assert set(c["auto_chose"]) <= set(c["us_per_call"]) - {"auto"}
        assert c["chosen_over_best"] >= 1.0
    assert {"numba", "jax", "auto", "auto's choices"} <= set(suite["totals_us"])
    assert {"auto_us", "numba_us", "lookup_us"} <= set(results["lowering"])


def test_bench_kernel_memory_runs():
    import json

    command = [sys.executable, str(TOOLS / "bench_kernel_memory.py"), "--n", "2"]
    command += ["--repeats", "1", "--rows", "cold,warm,jnp", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=900)
    results = json.loads(done.stdout)
    assert (results["n"], results["repeats"]) == (2, 1)
    assert list(results["rows"]) == ["cold", "warm", "jnp"]
    for row in results["rows"].values():
        assert len(row["per_kernel_mib"]) == 1 and row["baseline_mib"] > 0


def test_downstream_example_says_when_it_has_no_wheels(tmp_path):
    # CI gives it the wheels wheel_smoke.py built; a folder without them is named.
    out = subprocess.run(
        [sys.executable, str(TOOLS / "downstream_example.py"), "--wheels", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode, out.stdout) == (1, f"no wheels in {tmp_path}\n")


def test_wheel_smoke_tries_packages_at_once_and_their_lines_stay_together(monkeypatch, capsys):
    (tool,) = _tools("wheel_smoke")
    monkeypatch.setattr(tool, "build_wheels", lambda dist: {p: dist for p in tool.PACKAGES})
    monkeypatch.setattr(tool, "page_problems", lambda wheel: [])
    both = threading.Barrier(2, timeout=30)

    def smoke(package, wheels, scratch):
        both.wait()  # each returns only once the other has started: at once, or a timeout
        return ([] if package == "ffi-core" else ["README example failed"]), [f"  {package}: ran"]

    monkeypatch.setattr(tool, "smoke", smoke)
    assert tool.main(["ffi-core", "kernel-check", "--jobs", "2"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" (")[0] for line in lines[2:6]] == [
        "  ffi-core: ran",
        "ffi-core: ok",
        "  kernel-check: ran",
        "kernel-check: FAILED",
    ]
    refused = subprocess.run(
        [sys.executable, str(TOOLS / "wheel_smoke.py"), "--jobs", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[-1] == (
        "wheel_smoke.py: error: --jobs: packages tried at once, at least 1; got 0"
    )


def _tree(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_import_layers_holds_for_the_tree_and_finds_circles_and_upward_imports(tmp_path):
    (import_layers,) = _tools("import_layers")
    assert import_layers.check() == []
    packages = _tree(
        tmp_path,
        {
            "ffi-core/src/ffi_core/__init__.py": "from . import _a\n",
            # A circle through a lazy import and through a package's __init__.
            "ffi-core/src/ffi_core/_a.py": "def f():\n    from ffi_core.sub import _c\n",
            "ffi-core/src/ffi_core/sub/__init__.py": "from .. import _b\n",
            "ffi-core/src/ffi_core/sub/_c.py": "",
            "ffi-core/src/ffi_core/_b.py": "from ._a import f\n",
            # Not a circle: only for the type checker.
            "ffi-core/src/ffi_core/_d.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import _e\n"
            ),
            "ffi-core/src/ffi_core/_e.py": "from . import _d\n",
            # Upward and sideways.
            "ffi-core/src/ffi_core/_up.py": "import kernel_bench\n",
            "warp-ffi/src/warp_ffi/__init__.py": "from numba_cpu_ffi import x\n",
            "numba-cpu-ffi/src/numba_cpu_ffi/__init__.py": "",
            "kernel-bench/src/kernel_bench/__init__.py": "import ffi_core\n",
        },
    )
    assert import_layers.check(packages, ()) == [
        "ffi_core._up imports kernel_bench, of a higher layer",
        "warp_ffi imports numba_cpu_ffi, of the same layer",
        "import circle: ffi_core._a -> ffi_core.sub -> ffi_core._b -> ffi_core._a",
    ]
    circle = frozenset({"ffi_core._a", "ffi_core._b", "ffi_core.sub"})
    assert import_layers.check(packages, (circle,))[2:] == []
    stale = frozenset({"ffi_core._d", "ffi_core._e"})
    assert import_layers.check(packages, (circle, stale))[2:] == [
        "EXCEPTIONS lists a circle that is gone (remove it): ffi_core._d, ffi_core._e"
    ]


def test_bench_instrument_alone_reports_the_spread_and_the_load_of_other_processes():
    command = [sys.executable, str(TOOLS / "bench_instrument.py"), "--alone", "0.5"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600).stdout
    lines = out.splitlines()
    assert [line.split(":")[0].split(" (")[0] for line in lines] == [
        "reference op",
        "  spread over the whole 0.5 s",
        "  spread over 15 consecutive runs",
        "  its runs 1.1x its median or more",
        "other processes meanwhile",
    ]
    assert lines[-1].endswith("% of the CPUs") or lines[-1].endswith(": unknown")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_bench_instrument_alone_per_cpu_times_the_reference_op_on_each_cpu():
    command = [sys.executable, str(TOOLS / "bench_instrument.py"), "--alone", "0.5", "--per-cpu"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600).stdout
    cpus = sorted(os.sched_getaffinity(0))
    per_cpu = [line for line in out.splitlines() if line.startswith("    CPU ")]
    assert [int(line.split()[1].rstrip(":")) for line in per_cpu] == cpus
    for line in per_cpu:
        assert re.fullmatch(
            r"    CPU \d+: \d+ runs of \d+\.\d{3} ms \(median\), \d\.\d\dx the fastest CPU's; "
            r"spread \d+\.\d%",
            line,
        )
    assert min(float(line.split("x the")[0].split()[-1]) for line in per_cpu) == 1.0


def test_bench_instrument_per_cpu_names_the_slower_cpu(capsys):
    (tool,) = _tools("bench_instrument")
    # CPU 0 runs the op 1.3x as long as CPU 1, a run each in turn.
    tool._per_cpu([0, 1] * 50, [1.3e-3, 1.0e-3] * 50)
    assert capsys.readouterr().out.splitlines()[1:] == [
        "    CPU 0: 50 runs of 1.300 ms (median), 1.30x the fastest CPU's; spread 0.0%",
        "    CPU 1: 50 runs of 1.000 ms (median), 1.00x the fastest CPU's; spread 0.0%",
    ]


def _alone_heads(out: str) -> list[str]:
    return [line.split(":")[0].split(" (")[0] for line in out.splitlines()]


def _probe_heads(*kinds: str) -> list[str]:
    spread = ("  spread over the whole 0.5 s", "  spread over 15 consecutive runs")
    heads = ["reference op", *spread, "  its runs 1.1x its median or more"]
    for kind in kinds:
        heads += [f"probe {kind}, wall", *spread, f"probe {kind}, CPU time", *spread]
        heads.append("  its runs 1.1x its median or more")
    return [*heads, "other processes meanwhile"]


def test_bench_instrument_probe_runs_beside_the_reference_op_with_idle_cpus_as_set():
    command = [sys.executable, str(TOOLS / "bench_instrument.py"), "--alone", "0.5", "--probe"]
    out = subprocess.run(
        [*command, "--system-idle"], capture_output=True, text=True, check=True, timeout=600
    ).stdout
    assert _alone_heads(out) == _probe_heads("alu")  # the default kind
    assert re.search(r"correlation with the reference op's runs -?\d\.\d\d, of its wall", out)


@pytest.mark.parametrize("flag", ["--probe", "--profile", "--per-cpu", "--system-idle"])
def test_bench_instrument_options_of_alone_are_refused_without_it(flag, capsys):
    (tool,) = _tools("bench_instrument")
    with pytest.raises(SystemExit) as refused:
        tool.main([flag])
    assert refused.value.code == 2
    assert (
        "--probe, --profile, --simulate, --per-cpu and --system-idle go with --alone"
        in capsys.readouterr().err
    )


def test_bench_instrument_probes_of_each_kind():
    command = [sys.executable, str(TOOLS / "bench_instrument.py"), "--alone", "0.5"]
    command += ["--probe", "python", "numpy"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600).stdout
    assert _alone_heads(out) == _probe_heads("python", "numpy")


def _tools(*names):
    sys.path.insert(0, str(TOOLS))
    try:
        return [__import__(name) for name in names]
    finally:
        sys.path.remove(str(TOOLS))


def test_bench_instrument_profile_counts_samples_per_run_where_the_slow_runs_spent_them(capsys):
    tool, perf = _tools("bench_instrument", "_perf")
    # Ten runs of 1 ms from t=0, every 2 ms; runs 3 and 7 slow. Each run has
    # two samples in the op's compiled loop on XLA's thread; the slow ones
    # also two in XLA's runtime, the others one; one sample falls between runs.
    starts = [2_000_000 * i for i in range(10)]
    ends = [s + 1_000_000 for s in starts]
    slow = [i in (3, 7) for i in range(10)]
    samples = []
    for i, s in enumerate(starts):
        samples += [(11, s + 100, "/tmp/perf-10.map"), (11, s + 200, "[unknown]")]
        samples += [(11, s + 300 + k, "/x/jaxlib/libjax_common.so") for k in range(1 + slow[i])]
    samples.append((10, 1_500_000, "/usr/lib/libc.so.6"))  # between runs 0 and 1
    tool._profile(starts, ends, slow, samples, pid=10)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| other")]
    assert rows == [
        "| other threads | compiled code (JIT) | 2.000 | 2.000 | 1.00 |",
        "| other threads | XLA's runtime (jaxlib) | 1.000 | 2.000 | 2.00 |",
    ]
    assert [perf.code(d) for d in ("[kernel.kallsyms]", "/lib/ld-linux-x86-64.so.2", "x.so")] == [
        "the kernel",
        "the C library",
        "other",
    ]


def test_bench_instrument_profile_under_perf():
    if not _tools("_perf")[0].can_sample():
        pytest.skip("perf cannot sample processes here")
    command = [sys.executable, str(TOOLS / "bench_instrument.py"), "--alone", "1", "--profile"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600).stdout
    assert "| thread | code | other runs | slow runs | slow / other |" in out
    assert "| other threads | compiled code (JIT) |" in out


@pytest.mark.parametrize(
    ("arrangement", "described"),
    [
        ("passes-1", "one pass (each case's rounds together)"),
        ("no-quiet", "no wait for the process's other threads before each timed run"),
        ("one-cpu", "the whole process pinned to one CPU (the last it may run on, as taskset -c)"),
    ],
)
def test_bench_instrument_compares_arrangements_of_the_rounds(arrangement, described):
    if arrangement == "one-cpu" and not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity here")
    command = [sys.executable, str(TOOLS / "bench_instrument.py"), "--quick", "--processes", "1"]
    command += ["--arrangements", arrangement, "--fresh-autotune"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600).stdout
    lines = out.splitlines()
    assert lines[0].startswith(f"{arrangement}, process 1: ")
    assert re.fullmatch(
        r".*, \d+ of 5 cases at most 5 %; backends' spread \d+\.\d %, \d+ s", lines[0]
    ), lines[0]
    # What the run said of the reference op's slow runs (kernel_bench._stretches).
    assert re.match(
        r"  the reference op ran at least 1\.1x its case's median in \d+% of its runs", lines[1]
    ), lines[1]
    if arrangement == "one-cpu" and os.cpu_count() > 1:
        last = max(os.sched_getaffinity(0))
        assert lines[1].endswith(
            f"; run on CPU {last} of the machine's {os.cpu_count()} (the process's affinity)"
        ), lines[1]
    row = lines[-1].split(" | ")
    assert row[0] == f"| {described}"
    assert row[1].endswith(" of 5")
    assert re.fullmatch(r"\d+\.\d % \|", row[3]), row


def test_bench_gpu_first_call_times_new_kernels_through_the_launcher():
    command = [sys.executable, str(TOOLS / "bench_gpu_first_call.py"), "--processes", "1"]
    command += ["--kernels", "2"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600).stdout
    lines = out.splitlines()
    assert lines[0].startswith("numba-cuda-ffi, new kernels' first calls under jit")
    assert [line.split()[0] for line in lines[2:]] == ["cold", "cached"]


def test_bench_portable_cpu_times_each_model_in_its_own_process():
    out = subprocess.run(
        [
            sys.executable,
            str(TOOLS / "bench_portable_cpu.py"),
            *("--processes", "1", "--models", "host", "generic"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout.splitlines()
    assert out[0] == "median µs per call over 1 processes [range]; Numba alone"
    assert out[1].split()[-2:] == ["host", "generic"]
    assert [line.split()[0] for line in out[2:]] == ["add", "LIF", "65,536"]


def test_bench_first_call_times_kernels_of_another_dtype_each(tmp_path):
    # --shapes: each kernel its own dtype, so numba-cpu-ffi compiles a handler for each.
    result = tmp_path / "first_call.json"
    command = [sys.executable, str(TOOLS / "bench_first_call.py"), "--shapes"]
    command += ["--processes", "1", "--kernels", "2", "--json", str(result)]
    subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
    runs = json.loads(result.read_text())["results"]
    assert list(runs) == ["numba_kernel cold", "numba_kernel cached", "njit cold", "jnp jit"]
    assert all(len(r[0]["per_kernel_s"]) == 2 for r in runs.values())
    refused = subprocess.run(
        [*command[:3], "--vmap", "64"], capture_output=True, text=True, check=False, timeout=60
    )
    assert refused.returncode == 2
    assert "--shapes and --vmap measure different things" in refused.stderr


def test_bench_numba_cpu_profiles_the_large_add_under_perf():
    if not _tools("_perf")[0].can_sample():
        pytest.skip("perf cannot sample processes here")
    command = [sys.executable, str(TOOLS / "bench_numba_cpu.py"), "--quick"]
    command += ["--only", "add_2pow20_profile"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600).stdout
    for name in ("numba", "jnp", "numba_alone"):
        assert re.search(rf"^  {name}_us_per_call +\d", out, re.M), out
    # Numba alone runs its loop on the calling thread; our call on XLA's worker.
    assert re.search(
        r"^  numba_alone: compiled code \(JIT\), calling thread +[\d.]+ us$", out, re.M
    )
    assert re.search(r"^  numba: compiled code \(JIT\), other threads +[\d.]+ us$", out, re.M)


def _recording(runs_ms):
    # Runs back to back from t=0: their starts (ns) and lengths (s).
    began, now = [], 0
    for t in runs_ms:
        began.append(now)
        now += round(t * 1e6)
    return began, [t / 1e3 for t in runs_ms]


def test_bench_instrument_tells_how_the_reference_ops_rate_moved_between_stretches(capsys):
    (tool,) = _tools("bench_instrument")
    # 4,000 runs of 1 ms, then 4,000 of 1.3 ms, then 1,000 of 1 ms (the last
    # stretch, cut short, is left out).
    tool._windows(*_recording([1.0] * 4000 + [1.3] * 3077 + [1.0] * 1000))
    assert capsys.readouterr().out == (
        "  over 2 stretches of 4 s: medians 1.00x to 1.30x the whole time's; "
        "spread within a stretch 0.0% to 0.0% (median 0.0%)\n"
    )
    tool._windows(*_recording([1.0] * 500))  # shorter than two stretches: nothing
    assert capsys.readouterr().out == ""


def _results(path, cases):
    records = [
        {"label": label, "backend": f"b{k}", "program_median_ms": ms}
        for label, times in cases.items()
        for k, ms in enumerate(times)
    ]
    records.append({"label": "gone", "backend": "b0", "program_median_ms": None})
    path.write_text(json.dumps({"metadata": {}, "records": records}))
    return path


def test_bench_instrument_schedules_the_reference_op_as_the_suite_orders_its_rounds(tmp_path):
    (tool,) = _tools("bench_instrument")
    cases = tool._case_backends(_results(tmp_path / "r.json", {"a": [0.001], "b": [50.0, 2.0]}))
    assert cases == [[1e-6], [0.05, 0.002]]
    times, phase = tool._schedule(cases, rounds=15, passes=5, run=0.001)
    # A round: the reference op's run, and each backend's untimed call and its
    # run (at least one call); a warm-up round a pass besides the 15.
    round_a, round_b = 0.001 + 1e-6 + 0.001, 0.001 + 2 * 0.05 + 2 * 0.002
    assert phase == pytest.approx(20 * (round_a + round_b))
    assert [len(t) for t in times] == [15, 15]
    assert all(t == sorted(t) and 0 < t[0] and t[-1] < phase for t in times)
    (tmp_path / "other.json").write_text('{"records": [1, 2]}')
    for path in (_results(tmp_path / "none.json", {}), tmp_path / "other.json"):
        with pytest.raises(ValueError, match="holds no in-program times"):
            tool._case_backends(path)
    with pytest.raises(ValueError, match=r"cannot be read .*: run kernel-bench first"):
        tool._case_backends(tmp_path / "absent.json")


def test_bench_instrument_simulates_arrangements_on_one_recording(tmp_path, capsys):
    (tool,) = _tools("bench_instrument")
    results = _results(tmp_path / "r.json", {"a": [0.001], "b": [0.002, 0.001]})
    tool.simulate(*_recording([1.0] * 60_000), results)  # a steady machine, 60 s
    out = capsys.readouterr().out
    rows = [r for r in out.splitlines() if r.startswith("| 15 | 5 | 1.0 ms")]
    assert out.splitlines()[-1] == (
        "a case's 15 runs back to back, nothing between them: "
        + "; ".join(f"{k}.0 ms: 0% above 5 %, all 2 at most 5 % 100%" for k in (1, 2, 4, 8))
    )
    assert re.fullmatch(
        r"\| 15 \| 5 \| 1\.0 ms \| 0 s \| 2\.0 of 2 \| 100% of \d+ \| 0\.0% \|", rows[0]
    )
    # Every other run 1.3 ms: each case's rounds meet both; two runs together
    # always last 2.3 ms.
    tool.simulate(*_recording([1.0, 1.3] * 30_000), results)
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith(
        "a case's 15 runs back to back, nothing between them: 1.1 ms: 100% above 5 %, all 2 at "
        "most 5 % 0%; 2.3 ms: 0% above 5 %, all 2 at most 5 % 100%;"
    )
    # (the first row of 15 rounds in 5 passes: runs of the recording's median)
    row = next(r for r in out.splitlines() if r.startswith("| 15 | 5 | "))
    assert re.fullmatch(
        r"\| 15 \| 5 \| 1\.\d ms \| 0 s \| 0\.\d of 2 \| \d+% of \d+ \| \d+\.\d% \|", row
    )
    assert " 2.0 of 2 " not in row
    # A recording shorter than an arrangement's phase says so.
    tool.simulate(*_recording([1.0] * 2_000), _results(tmp_path / "s.json", {"c": [40.0]}))
    assert "| 45 | 5 | 1.0 ms | 4 s | (a longer recording) | | |" in capsys.readouterr().out


def test_bench_instrument_simulate_needs_alone_and_a_results_file(tmp_path, capsys):
    (tool,) = _tools("bench_instrument")
    for args, message in (
        (
            ["--simulate"],
            "--probe, --profile, --simulate, --per-cpu and --system-idle go with --alone",
        ),
        (["--alone", "1", "--simulate", str(tmp_path / "no.json")], "run kernel-bench first"),
        (["--alone", "1", "--simulate", str(tmp_path)], "run kernel-bench first"),
    ):
        with pytest.raises(SystemExit) as refused:
            tool.main(args)
        assert refused.value.code == 2
        assert message in capsys.readouterr().err
