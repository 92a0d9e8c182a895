"""How quiet kernel-bench's instrument is: the reference op's spread
(interquartile range over median) in each case of the main job, under the
current arrangement of its rounds and under others.

    uv run python tools/bench_instrument.py --processes 4            # current, and a 2 ms pause
    uv run python tools/bench_instrument.py --processes 3 --arrangements current passes-15 run-3ms
    uv run python tools/bench_instrument.py --processes 4 --quick
    uv run python tools/bench_instrument.py --alone 20               # the machine's own noise
    uv run python tools/bench_instrument.py --alone 20 --probe       # ... against a loop without JAX
    uv run python tools/bench_instrument.py --alone 20 --system-idle # ... idle CPUs not kept awake

``--alone SECONDS`` measures the machine instead: one fresh process runs the
reference op's 1 ms chains back to back, nothing else, for that long, and
prints their spread over the whole time and over every 15 consecutive runs
(one case's rounds): the least spread the suite can report on this machine,
and the share of the CPUs other processes used meanwhile (from /proc/stat:
a spread with none used is the machine's, or on a virtual machine its host's).
Idle CPUs are kept awake as the suite keeps them (``kernel_bench._awake``);
``--system-idle`` leaves them as the system sets them. With ``--probe`` the
reference op's runs alternate with runs of a loop that touches no memory and
no JAX (integer arithmetic compiled by Numba, in the calling thread,
calibrated to the same length): each is reported the same way, with the
probe's CPU time per run (the thread's own, from ``time.thread_time``) beside
its wall time, and how the two ops' consecutive runs move together. If the probe spreads as much, the spread is the rate at
which the machine runs this process, which no arrangement of the rounds
changes; if its CPU time spreads like its wall time, the process was running
all along, just slower (not descheduled).

Each process runs ``kernel-bench`` (``--quick`` passed on) under one of the
``--arrangements`` (:data:`ARRANGEMENTS`; the library is patched in that
process only), the arrangements alternating process by process, forward then
reversed; each process's per-case spreads are read from its records, and
below them what the run said of the reference op's slow runs: whether the
backends timed beside them were slow too (the whole machine) or not
(``kernel_bench._stretches``). The
processes share one autotune directory, filled by an untimed first run, so
that they time their rounds rather than autotune (``--fresh-autotune``: an
empty one each). Run it on an idle machine: the point is what the instrument
adds, not what other jobs do.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: What each arrangement changes in its process, and its description.
ARRANGEMENTS = {
    "current": "the current arrangement",
    "settle-2ms": "a 2 ms untimed pause before each timed run",
    "run-2ms": "runs of 2 ms in the suite and the autotuner",
    "run-3ms": "runs of 3 ms in the suite and the autotuner",
    "run-4ms": "runs of 4 ms in the suite and the autotuner",
    "rounds-25": "25 rounds a case (--n-runs 25)",
    "passes-15": "15 passes of one round, a warm-up round each",
    "passes-15-warmup-first": "15 passes, the warm-up round only in the first",
    "passes-15-prime-warmup": "15 passes, one call of each backend as the warm-up",
    "passes-1": "one pass (each case's rounds together)",
    "omp-passive": "OMP_WAIT_POLICY=PASSIVE",
    "numba-auto-only": "numba and auto only (--backends numba auto)",
    "system-idle": "idle CPUs as the system sets (--no-keep-cpus-awake)",
}

CHILD = """
import sys
import jax, jax.numpy as jnp
from kernel_bench import _program, _suite_cli, _timing
from kernel_bench.autotune import _measure
arrangement = sys.argv[1]
if arrangement == "settle-2ms":
    _timing.SETTLE_SECONDS = 0.002
if arrangement.startswith("run-"):
    seconds = float(arrangement[len("run-") : -len("ms")]) * 1e-3
    _timing.SECONDS_PER_RUN = _measure.SECONDS_PER_RUN = seconds
    for scale in _suite_cli.PROGRAM_SECONDS:
        _suite_cli.PROGRAM_SECONDS[scale] = seconds
if arrangement.startswith("passes-"):
    _program.program_times.__kwdefaults__["passes"] = int(arrangement.split("-")[1])
interleaved = _program.interleaved
if arrangement == "passes-15-warmup-first":
    def first_only(*args, seed=0, **kwargs):
        return interleaved(*args, seed=seed, warmup_rounds=int(seed == 0), **kwargs)
    _program.interleaved = first_only
if arrangement == "passes-15-prime-warmup":
    def primed(runs, counts, data, *args, seed=0, **kwargs):
        if seed:
            one = jnp.asarray(1, dtype=jnp.int32)
            for run in runs.values():
                jax.block_until_ready(run(one, *data))
        return interleaved(runs, counts, data, *args, seed=seed, warmup_rounds=int(seed == 0),
                           **kwargs)
    _program.interleaved = primed
from kernel_bench._cli import main
sys.argv = ["kernel-bench", *sys.argv[2:]]
if arrangement == "numba-auto-only":
    sys.argv += ["--backends", "numba", "auto"]
if arrangement == "system-idle":
    sys.argv += ["--no-keep-cpus-awake"]
if arrangement.startswith("rounds-"):
    sys.argv += ["--n-runs", arrangement[len("rounds-") :]]
main()
"""
ALONE = """
import atexit, sys, time
import jax, jax.numpy as jnp
from kernel_bench import _load, _program, _timing
from kernel_bench._awake import keep_cpus_awake

seconds, awake, probe = float(sys.argv[1]), sys.argv[2] == "awake", sys.argv[3] == "probe"
held = keep_cpus_awake(awake)
held.__enter__()  # held until the process ends
atexit.register(held.__exit__, None, None, None)
run = _program._reference_run()
x = jnp.linspace(0.0, 1.0, _program.REFERENCE_SIZE, dtype=jnp.float32)
count = jnp.asarray(_timing.calls_per_run(run, (x,), _timing.SECONDS_PER_RUN), dtype=jnp.int32)
if probe:
    import numba

    @numba.njit(cache=False)
    def spin(n):
        h = numba.uint64(88172645463325252)
        for _ in range(n):
            h ^= h << numba.uint64(13)
            h ^= h >> numba.uint64(7)
            h ^= h << numba.uint64(17)
        return h

    def timed(n):
        start = time.perf_counter()
        spin(n)
        return time.perf_counter() - start

    spin(1)
    n = 1 << 20
    n = int(n * _timing.SECONDS_PER_RUN / min(timed(n) for _ in range(3)))
meter = _load.OtherLoad()
end = time.perf_counter() + seconds
while time.perf_counter() < end:
    start = time.perf_counter()
    jax.block_until_ready(run(count, x))
    row = [time.perf_counter() - start]
    if probe:
        cpu, start = time.thread_time(), time.perf_counter()
        spin(n)
        row += [time.perf_counter() - start, time.thread_time() - cpu]
    print(*row)
print("load", meter.share())
"""
NOISE = re.compile(r"spread \(IQR/median\) ([\d.]+)% to ([\d.]+)% over the cases")


def run(arrangement: str, extra: list[str], autotune: str) -> tuple[list[float], str] | None:
    """One fresh process of the main job under ``arrangement``: the reference
    op's spread in each case, in per cent, and what the run said of its slow
    runs (``kernel_bench._stretches``), or None where it gave none."""
    with tempfile.TemporaryDirectory() as tmp:
        records = Path(tmp) / "records.json"
        env = {**os.environ, "KERNEL_BENCH_AUTOTUNE_DIR": autotune}
        if arrangement == "omp-passive":
            env["OMP_WAIT_POLICY"] = "PASSIVE"
        command = [sys.executable, "-c", CHILD, arrangement, *extra, "--no-plot"]
        proc = subprocess.run(
            [*command, "--output", str(records)], capture_output=True, text=True, env=env
        )
        if proc.returncode != 0 or NOISE.search(proc.stdout) is None or not records.exists():
            print(proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
            return None
        saved = json.loads(records.read_text())
    from kernel_bench._stretches import describe

    # One noise per case, the same on every record of the case.
    per_case = {r["label"]: r["noise"] for r in saved["records"] if r.get("noise") is not None}
    stretches = describe(saved["metadata"].get("slow_stretches") or {})
    return [
        100 * v for v in per_case.values()
    ], stretches or "(no figures of the slow runs in the records)"


def spread(values: list[float]) -> float:
    """The interquartile range over the median, in per cent."""
    from kernel_bench._timing import Spread

    return 100 * Spread.of(values).relative_iqr


def alone(seconds: float, probe: bool = False, awake: bool = True) -> int:
    """The reference op alone for ``seconds``: its spread overall and per 15
    runs; with ``probe``, alternating with a loop without JAX; idle CPUs kept
    awake as the suite keeps them, unless ``awake`` is False."""
    flags = ["awake" if awake else "-", "probe" if probe else "-"]
    proc = subprocess.run(
        [sys.executable, "-c", ALONE, str(seconds), *flags],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = proc.stdout.splitlines()
    load = lines.pop().split()[1]
    columns = list(zip(*(map(float, line.split()) for line in lines), strict=True))
    names = ["reference op", "probe, wall", "probe, CPU time"][: len(columns)]
    for name, runs in zip(names, columns, strict=True):
        _report(name, list(runs), seconds)
    if probe:
        ref, wall, cpu = (list(c) for c in columns)
        print(f"correlation of consecutive runs, reference op and probe: {_corr(ref, wall):.2f}")
        print(f"correlation of the probe's wall and CPU time: {_corr(wall, cpu):.2f}")
    others = "unknown" if load == "None" else f"{100 * float(load):.1f}% of the CPUs"
    print(f"other processes meanwhile: {others}")
    return 0


def _report(name: str, runs: list[float], seconds: float) -> None:
    blocks = sorted(spread(runs[i : i + 15]) for i in range(0, len(runs) - 14, 15))
    over = sum(b > 5 for b in blocks)
    print(f"{name}: {len(runs)} runs of {1e3 * sorted(runs)[len(runs) // 2]:.3f} ms (median)")
    print(f"  spread over the whole {seconds:g} s: {spread(runs):.1f}%")
    if not blocks:
        print("  spread over 15 consecutive runs: fewer than 15 runs")
        return
    print(
        f"  spread over 15 consecutive runs ({len(blocks)} blocks): median "
        f"{blocks[len(blocks) // 2]:.1f}%, 90th percentile {blocks[int(0.9 * len(blocks))]:.1f}%, "
        f"most {blocks[-1]:.1f}%; above 5% in {over} ({100 * over / len(blocks):.0f}%)"
    )


def _corr(a: list[float], b: list[float]) -> float:
    """Pearson's correlation of two series of equal length."""
    import statistics

    return statistics.correlation(a, b)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="fresh processes per arrangement")
    parser.add_argument(
        "--arrangements",
        nargs="+",
        choices=list(ARRANGEMENTS),
        default=["current", "settle-2ms"],
        metavar="NAME",
        help=f"arrangements to compare (default: current settle-2ms): {', '.join(ARRANGEMENTS)}",
    )
    parser.add_argument("--quick", action="store_true", help="kernel-bench --quick")
    parser.add_argument(
        "--fresh-autotune", action="store_true", help="an empty autotune directory each process"
    )
    parser.add_argument(
        "--alone", type=float, metavar="SECONDS", help="time the reference op alone this long"
    )
    parser.add_argument(
        "--probe",
        action="store_true",
        help="with --alone: alternate with a loop without JAX (the machine's rate)",
    )
    parser.add_argument(
        "--system-idle",
        action="store_true",
        help="with --alone: leave idle CPUs as the system sets them (the suite keeps them awake)",
    )
    args = parser.parse_args(argv)
    if args.alone is not None:
        return alone(args.alone, args.probe, not args.system_idle)
    if args.probe or args.system_idle:
        parser.error("--probe and --system-idle go with --alone")
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    extra = ["--quick"] if args.quick else []
    results: dict[str, list[list[float]]] = {a: [] for a in args.arrangements}
    order = list(args.arrangements)
    with tempfile.TemporaryDirectory() as root:
        shared = os.path.join(root, "autotune")
        os.mkdir(shared, 0o700)
        if not args.fresh_autotune:
            run("current", extra, shared)  # fills the autotune directory, untimed
        for k in range(args.processes):
            for name in order if k % 2 == 0 else order[::-1]:
                autotune = shared
                if args.fresh_autotune:
                    autotune = tempfile.mkdtemp(dir=root)
                start = time.monotonic()
                found = run(name, extra, autotune)
                wall = time.monotonic() - start
                if found is None:
                    print(f"{name}, process {k + 1}: no result", flush=True)
                    continue
                spreads, stretches = found
                print(f"{name}, process {k + 1}: {_summary(spreads)}, {wall:.0f} s", flush=True)
                print(f"  {stretches}", flush=True)
                results[name].append(spreads)
    print("\n| arrangement | cases at most 5 %, per process | spread over the cases, per process |")
    print("|---|---|---|")
    for name, found in results.items():
        counts = ", ".join(f"{sum(v <= 5 for v in f)} of {len(f)}" for f in found) or "-"
        spans = ", ".join(f"{min(f):.1f} to {max(f):.1f} %" for f in found) or "no result"
        print(f"| {ARRANGEMENTS[name]} | {counts} | {spans} |")
    return 0


def _summary(found: list[float]) -> str:
    at_most = sum(v <= 5 for v in found)
    return f"{min(found):.1f} to {max(found):.1f} %, {at_most} of {len(found)} cases at most 5 %"


if __name__ == "__main__":
    sys.exit(main())
