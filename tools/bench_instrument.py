"""How quiet kernel-bench's instrument is: the reference op's spread
(interquartile range over median) in each case of the main job, under the
current arrangement of its rounds and under others.

    uv run python tools/bench_instrument.py --processes 4            # current, and no quiet wait
    uv run python tools/bench_instrument.py --processes 3 --arrangements current passes-15 run-3ms
    uv run python tools/bench_instrument.py --processes 4 --quick
    uv run python tools/bench_instrument.py --alone 20               # the machine's own noise
    uv run python tools/bench_instrument.py --alone 20 --probe       # ... against a loop without JAX
    uv run python tools/bench_instrument.py --alone 20 --probe alu python numpy
    uv run python tools/bench_instrument.py --alone 20 --profile     # ... sampled by perf
    uv run python tools/bench_instrument.py --alone 20 --system-idle # ... idle CPUs not kept awake
    uv run python tools/bench_instrument.py --alone 100 --simulate   # ... the suite's rounds laid over it
    uv run python tools/bench_instrument.py --alone 20 --per-cpu     # ... on each CPU in turn
    uv run python tools/bench_instrument.py --processes 4 --arrangements current one-cpu

``--alone SECONDS`` measures the machine instead: one fresh process runs the
reference op's 1 ms chains back to back, nothing else, for that long, and
prints their spread over the whole time and over every 15 consecutive runs
(one case's rounds): the least spread the suite can report on this machine;
the share of its runs at least ``_stretches.SLOW`` times its median, to set
beside the same share in the suite's noise line (more there: the suite's own
work slows the op; as many: the machine does); and the share of the CPUs
other processes used meanwhile (from /proc/stat: a spread with none used is
the machine's, or on a virtual machine its host's).
Idle CPUs are kept awake as the suite keeps them (``kernel_bench._awake``);
``--system-idle`` leaves them as the system sets them. With ``--probe`` the
reference op's runs alternate with runs of loops without JAX, in the calling
thread, each calibrated to a run's length (:data:`PROBES`: ``alu``, integer
arithmetic compiled by Numba that touches no memory, the default; ``python``,
a pure-Python loop, branchy code; ``numpy``, NumPy calls on 1,024 floats):
each is reported the same way, with its CPU time per run (the thread's own,
from ``time.thread_time``) beside its wall time, and how often it was slow
right after a slow run of the reference op. If a probe spreads as much, the
spread is the rate at which the machine runs that kind of code, which no
arrangement of the rounds changes; if its CPU time spreads like its wall
time, the process was running all along, just slower (not descheduled).
With ``--profile`` the process runs under ``perf record`` (its software
clock, 2,000 samples a second: no hardware counters needed; ``perf`` must be
installed and allowed to sample the process), and the samples within the
reference op's runs are counted per run by thread and kind of code, for its
slow runs (at least ``_stretches.SLOW`` times its median) and the others:
the kinds whose count grows are where the slow runs lost their time.
With ``--simulate`` the suite's schedule of the reference op (its cases and
backends read from a kernel-bench results file) is laid over the recording as
each arrangement of :data:`SIMULATED` would order it: every arrangement then
meets the same noise, which fresh processes, each meeting the machine in
another state, never do (:func:`simulate`). With ``--per-cpu`` every thread
of the process is pinned to each CPU it may run on in turn, a run each after
an untimed one, and the op's rate on each CPU is printed against the
fastest's (:func:`_per_cpu`): on a virtual machine one CPU can run slower
than another with nothing else running (its host's core is shared), and an
unpinned run's rate then follows where its threads landed. The arrangement
``one-cpu`` runs the whole suite pinned to one CPU, as ``taskset -c`` would.

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
import bisect
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import _perf
from kernel_bench._program import _pass_sizes
from kernel_bench._stretches import SLOW, describe
from kernel_bench._suite_cli import _pinned
from kernel_bench._timing import Spread

#: What each arrangement changes in its process, and its description.
ARRANGEMENTS = {
    "current": "the current arrangement",
    "no-quiet": "no wait for the process's other threads before each timed run",
    "settle-2ms": "a 2 ms untimed pause before each timed run",
    "settle-5ms": "a 5 ms untimed pause before each timed run",
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
    "one-cpu": "the whole process pinned to one CPU (the last it may run on, as taskset -c)",
}

CHILD = """
import os, sys
arrangement = sys.argv[1]
if arrangement == "one-cpu":
    # Before JAX, numba or Warp start a thread: every thread inherits it.
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
import jax, jax.numpy as jnp
from kernel_bench import _program, _suite_cli, _timing
from kernel_bench.autotune import _measure
if arrangement == "no-quiet":
    from kernel_bench import _quiet

    class Loud(_quiet.Quiet):
        def __init__(self, enabled=True, limit=_quiet.LIMIT_SECONDS):
            super().__init__(enabled=False, limit=limit)

    _timing.Quiet = _program.Quiet = Loud
if arrangement.startswith("settle-"):
    _timing.SETTLE_SECONDS = float(arrangement[len("settle-") : -len("ms")]) * 1e-3
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
import atexit, os, sys, time
import jax, jax.numpy as jnp
import numpy as np
from kernel_bench import _load, _program, _timing
from kernel_bench._awake import keep_cpus_awake

seconds, awake, per_cpu = float(sys.argv[1]), sys.argv[2] == "awake", sys.argv[3] == "per-cpu"
probes = sys.argv[4:]
held = keep_cpus_awake(awake)
held.__enter__()  # held until the process ends
atexit.register(held.__exit__, None, None, None)
run = _program._reference_run()
x = jnp.linspace(0.0, 1.0, _program.REFERENCE_SIZE, dtype=jnp.float32)
count = jnp.asarray(_timing.calls_per_run(run, (x,), _timing.SECONDS_PER_RUN), dtype=jnp.int32)


def alu(n):
    return spin(n)


def python(n):
    seen, h = {}, 0
    for i in range(n):
        k = i & 63
        if k in seen:
            h += seen[k]
        else:
            seen[k] = i
        h ^= (i * 7) >> 2
    return h


a, b = np.linspace(0.0, 1.0, 1024, dtype=np.float32), np.empty(1024, np.float32)


def numpy(n):
    for _ in range(n):
        np.multiply(a, 0.5, out=b)
        np.add(b, 1.0, out=b)


def calibrated(probe):
    # The argument that makes one call of ``probe`` last a run.
    def timed(n):
        start = time.perf_counter()
        probe(n)
        return time.perf_counter() - start

    probe(1)
    n = 1
    while timed(n) < _timing.SECONDS_PER_RUN / 4:
        n *= 2
    return max(1, int(n * _timing.SECONDS_PER_RUN / min(timed(n) for _ in range(3))))


if "alu" in probes:
    import numba

    @numba.njit(cache=False)
    def spin(n):
        h = numba.uint64(88172645463325252)
        for _ in range(n):
            h ^= h << numba.uint64(13)
            h ^= h >> numba.uint64(7)
            h ^= h << numba.uint64(17)
        return h

loops = {"alu": alu, "python": python, "numpy": numpy}
timed_probes = [(loops[name], calibrated(loops[name])) for name in probes]
print("pid", os.getpid(), flush=True)
cpus = sorted(os.sched_getaffinity(0)) if per_cpu else [-1]


def pin(cpu):
    # Every thread of the process onto ``cpu``: XLA's and numba's included.
    for task in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(task), {cpu})
        except OSError:  # a thread that ended meanwhile
            pass


meter = _load.OtherLoad()
end = time.perf_counter() + seconds
turn = 0
while time.perf_counter() < end:
    where = cpus[turn % len(cpus)]
    turn += 1
    if where >= 0:
        pin(where)
        jax.block_until_ready(run(count, x))  # untimed: the first run after the move
    began, start = time.clock_gettime_ns(time.CLOCK_MONOTONIC), time.perf_counter()
    jax.block_until_ready(run(count, x))
    row = [began, where, time.perf_counter() - start]
    for probe, n in timed_probes:
        cpu, start = time.thread_time(), time.perf_counter()
        probe(n)
        row += [time.perf_counter() - start, time.thread_time() - cpu]
    print(*row)
print("load", meter.share())
"""
#: What ``--probe`` can alternate with the reference op: each a loop in the
#: calling thread, without JAX, calibrated to a run's length.
PROBES = {
    "alu": "a Numba loop of integer arithmetic (no memory, one predictable branch)",
    "python": "a pure-Python loop with a dict and branches (the interpreter: branchy code)",
    "numpy": "NumPy calls on 1,024 floats (x * 0.5 + 1, out= arrays)",
}
NOISE = re.compile(r"spread \(IQR/median\) ([\d.]+)% to ([\d.]+)% over the cases")
#: How long a stretch of the reference op's runs ``--alone`` compares with the
#: others (its median and spread), in seconds: about a third of the suite's
#: in-program phase.
WINDOW = 4.0
#: The arrangements ``--simulate`` lays over the recorded runs: rounds a case,
#: passes, run length (in runs of the recording: the suite's calibrated run).
SIMULATED = (
    (15, 5, 1),
    (15, 15, 1),
    (30, 5, 1),
    (45, 5, 1),
    (15, 5, 2),
    (30, 5, 2),
    (15, 5, 4),
    (15, 5, 8),
    (15, 1, 1),
    (15, 1, 4),
)


def run(
    arrangement: str, extra: list[str], autotune: str
) -> tuple[list[float], list[float], str] | None:
    """One fresh process of the main job under ``arrangement``: the reference
    op's spread in each case and each backend's in-program spread (its
    rounds' interquartile range over their median), both in per cent, and
    what the run said of its slow runs (``kernel_bench._stretches``) and of
    the CPUs it was pinned to, if fewer than the machine's; None where it gave
    none."""
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
    # One noise per case, the same on every record of the case.
    per_case = {r["label"]: r["noise"] for r in saved["records"] if r.get("noise") is not None}
    metadata = saved["metadata"]
    stretches = describe(metadata.get("slow_stretches") or {})
    said = [stretches or "(no figures of the slow runs in the records)"]
    said.append(_pinned(metadata.get("cpus"), metadata.get("cpu_count")))
    backends = [
        100 * (r["program_q75_ms"] - r["program_q25_ms"]) / r["program_median_ms"]
        for r in saved["records"]
        if r.get("program_median_ms")
    ]
    return [100 * v for v in per_case.values()], backends, "; ".join(s for s in said if s)


def spread(values: list[float]) -> float:
    """The interquartile range over the median, in per cent."""
    return 100 * Spread.of(values).relative_iqr


def alone(
    seconds: float,
    probes: Sequence[str] = (),
    awake: bool = True,
    profile: bool = False,
    results: Path | None = None,
    per_cpu: bool = False,
) -> int:
    """The reference op alone for ``seconds``: its spread overall, per 15
    runs and per stretch of :data:`WINDOW`; alternating with each of
    ``probes`` (:data:`PROBES`); idle CPUs kept awake as the suite keeps
    them, unless ``awake`` is False; with ``profile``, sampled by ``perf``
    (:func:`_profile`); with ``results`` (a kernel-bench results file), the
    suite's arrangements laid over the runs (:func:`simulate`)."""
    child = [sys.executable, "-c", ALONE, str(seconds), "awake" if awake else "-"]
    child += ["per-cpu" if per_cpu else "-", *probes]
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        command = [*_perf.RECORD, "-o", data, "--", *child] if profile else child
        try:
            proc = subprocess.run(command, capture_output=True, text=True)
        except FileNotFoundError:
            print("--profile needs perf (linux-perf) on the PATH", file=sys.stderr)
            return 1
        if proc.returncode != 0:
            print(proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
            return 1
        lines = proc.stdout.splitlines()
        pid = int(lines.pop(0).split()[1])
        load = lines.pop().split()[1]
        rows = [line.split() for line in lines]
        samples = _perf.samples(data) if profile else []
    began = [int(row[0]) for row in rows]
    where = [int(row[1]) for row in rows]
    columns = [
        [float(v) for v in column] for column in zip(*(row[2:] for row in rows), strict=True)
    ]
    ref = columns[0]
    ref_slow = _slow(ref)
    _report("reference op", ref, seconds)
    print(
        f"  its runs {SLOW}x its median or more: {_share(sum(ref_slow), len(ref))} "
        "(the suite's noise line gives this share of its runs, against each case's median)"
    )
    if per_cpu:
        _per_cpu(where, ref)
    else:
        _windows(began, ref)
    for k, name in enumerate(probes):
        wall, cpu = columns[1 + 2 * k], columns[2 + 2 * k]
        _report(f"probe {name}, wall", wall, seconds)
        _report(f"probe {name}, CPU time", cpu, seconds)
        wall_slow = _slow(wall)
        both = sum(r and p for r, p in zip(ref_slow, wall_slow, strict=True))
        print(
            f"  its runs {SLOW}x its median or more: {_share(sum(wall_slow), len(wall))} of "
            f"all, {_share(both, sum(ref_slow))} of those right after a slow run of the "
            f"reference op; correlation with the reference op's runs {_corr(ref, wall):.2f}, "
            f"of its wall and CPU time {_corr(wall, cpu):.2f}"
        )
    others = "unknown" if load == "None" else f"{100 * float(load):.1f}% of the CPUs"
    print(f"other processes meanwhile: {others}")
    if profile:
        ends = [start + round(1e9 * t) for start, t in zip(began, ref, strict=True)]
        _profile(began, ends, ref_slow, samples, pid)
    if results is not None:
        simulate(began, ref, results)
    return 0


def _per_cpu(where: list[int], runs: list[float]) -> None:
    """The reference op's rate on each CPU (every thread pinned to it, the CPUs
    in turn a run each): a CPU slower than the others, with nothing else
    running, is one its host gives less (a virtual CPU whose core another
    machine shares), and a run's rate then depends on where it landed."""
    found: dict[int, list[float]] = {}
    for cpu, t in zip(where, runs, strict=True):
        found.setdefault(cpu, []).append(t)
    fastest = min(statistics.median(t) for t in found.values())
    print("  per CPU (every thread pinned to it, the CPUs in turn a run each):")
    for cpu, t in sorted(found.items()):
        median = statistics.median(t)
        print(
            f"    CPU {cpu}: {len(t)} runs of {1e3 * median:.3f} ms (median), "
            f"{median / fastest:.2f}x the fastest CPU's; spread {spread(t):.1f}%"
        )


def _windows(began: list[int], runs: list[float]) -> None:
    """How the reference op's rate moved: the median of each stretch of
    :data:`WINDOW` seconds of its runs (those the recording spans whole)
    against the median of them all, and the spread within each. A stretch
    whose median is off the others' is one in which the machine ran the op at
    another rate, which rounds spread over several stretches meet whatever
    their arrangement. Nothing is said of a recording of fewer than two."""
    start, median = began[0], statistics.median(runs)
    windows: dict[int, list[float]] = {}
    for when, t in zip(began, runs, strict=True):
        windows.setdefault(int((when - start) / 1e9 // WINDOW), []).append(t)
    whole = [w for k, w in windows.items() if k < max(windows)]
    if len(whole) < 2:
        return
    rates = sorted(statistics.median(w) / median for w in whole)
    spreads = sorted(spread(w) for w in whole)
    print(
        f"  over {len(whole)} stretches of {WINDOW:g} s: medians {rates[0]:.2f}x to "
        f"{rates[-1]:.2f}x the whole time's; spread within a stretch {spreads[0]:.1f}% to "
        f"{spreads[-1]:.1f}% (median {spreads[len(spreads) // 2]:.1f}%)"
    )


def _case_backends(path: Path) -> list[list[float]]:
    """Per case of a kernel-bench results file, the in-program time per call
    of each backend it timed (seconds), in the order of the file."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(
            f"{path} cannot be read ({exc.strerror}): run kernel-bench first"
        ) from None
    try:
        cases: dict[str, list[float]] = {}
        for r in json.loads(text)["records"]:
            if r.get("program_median_ms"):
                cases.setdefault(r["label"], []).append(r["program_median_ms"] / 1e3)
    except (ValueError, KeyError, TypeError, AttributeError):
        cases = {}
    if not cases:
        raise ValueError(f"{path} holds no in-program times (not a kernel-bench results file?)")
    return list(cases.values())


def _schedule(
    cases: list[list[float]], rounds: int, passes: int, run: float
) -> tuple[list[list[float]], float]:
    """When, from the start of the in-program phase, the reference op's timed
    runs of each case would start, and how long the phase would last, if the
    suite ran ``rounds`` a case in ``passes`` passes of runs of ``run``
    seconds (as ``kernel_bench._program.program_times`` orders them: the cases
    shuffled every pass, a warm-up round each, every timed run after one
    untimed call; a backend slower than a run chains one call). Where in its
    round the reference op runs is drawn at random, as the round's order is."""
    draw = random.Random(1)
    round_of = [run + sum(t + max(run, t) for t in backends) for backends in cases]
    times: list[list[float]] = [[] for _ in cases]
    order, now = list(range(len(cases))), 0.0
    for share in _pass_sizes(rounds, passes):
        draw.shuffle(order)
        for i in order:
            now += round_of[i]  # the warm-up round
            for _ in range(share):
                times[i].append(now + draw.random() * round_of[i])
                now += round_of[i]
    return times, now


def simulate(began: list[int], runs: list[float], results: Path) -> None:
    """What other arrangements of the suite's rounds (:data:`SIMULATED`)
    would report as the reference op's spread on the machine just recorded:
    each arrangement's schedule of the reference op's runs (:func:`_schedule`,
    from the cases and backends of ``results``) laid over the recording at
    every half second it fits, a run k times as long as the recording's read
    as k consecutive runs of it (a run of the recording is the suite's:
    chained calls of the reference op calibrated to
    ``_timing.SECONDS_PER_RUN``). One recording serves every arrangement, so they are
    compared on the same noise, which fresh processes cannot be. (k runs
    launch k times: a longer run's spread is read a little high.)"""
    cases = _case_backends(results)
    span = (began[-1] - began[0]) / 1e9
    per_run = statistics.median(runs)
    print(
        f"\nthe suite's {len(cases)} cases (from {results}) laid over the recording at every "
        "0.5 s they fit:"
    )
    print(
        "| rounds a case | passes | run | in-program phase | cases at most 5 %, mean "
        "| offsets with every case at most 5 % | worst case's spread, median |"
    )
    print("|---|---|---|---|---|---|---|")
    for rounds, passes, k in SIMULATED:
        times, phase = _schedule(cases, rounds, passes, k * per_run)
        run = f"{1e3 * k * per_run:.1f} ms"
        offsets = [0.5 * j for j in range(int((span - phase) / 0.5))]
        if not offsets:
            print(f"| {rounds} | {passes} | {run} | {phase:.0f} s | (a longer recording) | | |")
            continue
        good, every, worst = [], 0, []
        for offset in offsets:
            found = []
            for case in times:
                at = [bisect.bisect_left(began, began[0] + 1e9 * (offset + t)) for t in case]
                found.append(spread([sum(runs[i : i + k]) for i in at if i + k <= len(runs)]))
            good.append(sum(f <= 5 for f in found))
            every += good[-1] == len(found)
            worst.append(max(found))
        print(
            f"| {rounds} | {passes} | {run} | {phase:.0f} s | {statistics.mean(good):.1f} of "
            f"{len(cases)} | {_share(every, len(offsets))} of {len(offsets)} | "
            f"{statistics.median(worst):.1f}% |"
        )
    _back_to_back(runs, sorted({k for _, _, k in SIMULATED}), len(cases))


def _back_to_back(runs: list[float], lengths: Sequence[int], cases: int) -> None:
    """The closest together a case's rounds can be: 15 runs of the recording
    back to back (k at a time for a run k times as long), nothing between
    them. The share of such blocks above 5 %, and the chance that ``cases``
    blocks drawn from them are all at most 5 % (if they were independent):
    what an arrangement of rounds kept together could at best report."""
    parts = []
    for k in lengths:
        joined = [sum(runs[i : i + k]) for i in range(0, len(runs) - k + 1, k)]
        blocks = _blocks(joined)
        if not blocks:
            continue
        quiet = sum(b <= 5 for b in blocks) / len(blocks)
        parts.append(
            f"{1e3 * statistics.median(joined):.1f} ms: {100 * (1 - quiet):.0f}% above 5 %, "
            f"all {cases} at most 5 % {100 * quiet**cases:.0f}%"
        )
    print(f"a case's 15 runs back to back, nothing between them: {'; '.join(parts)}")


def _slow(runs: Sequence[float]) -> list[bool]:
    median = statistics.median(runs)
    return [t >= SLOW * median for t in runs]


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _profile(starts: list[int], ends: list[int], slow: list[bool], samples: list, pid: int) -> None:
    """Where the reference op's slow runs spent their time against its other
    runs: the samples within its runs per run, by thread (the calling thread
    or the others: XLA's) and kind of code (``_perf.CODE``). Code that takes as many
    samples in both ran at the same rate; the kinds that grow are where the
    slow runs lost their time."""
    found: dict[bool, Counter[tuple[str, str]]] = {True: Counter(), False: Counter()}
    for tid, when, dso in samples:
        i = bisect.bisect_right(starts, when) - 1
        if i >= 0 and when <= ends[i]:
            found[slow[i]][(_perf.thread(tid, pid), _perf.code(dso))] += 1
    n_slow = sum(slow)
    n_other = len(slow) - n_slow
    if not n_other:
        print("profile: every run was slow")
        return
    print(
        f"\nprofile ({_perf.FREQUENCY} samples a second, within the reference op's runs; "
        f"{n_slow} slow runs, {n_other} others): samples per run"
    )
    print("| thread | code | other runs | slow runs | slow / other |")
    print("|---|---|---|---|---|")
    kinds = found[False] + found[True]
    for kind in sorted(kinds, key=kinds.__getitem__, reverse=True):
        other = found[False][kind] / n_other
        slower = found[True][kind] / n_slow if n_slow else None
        ratio = "-" if slower is None or not other else f"{slower / other:.2f}"
        shown = "-" if slower is None else f"{slower:.3f}"
        print(f"| {kind[0]} | {kind[1]} | {other:.3f} | {shown} | {ratio} |")


def _blocks(runs: Sequence[float]) -> list[float]:
    """The spread (per cent) of each 15 consecutive runs, as many whole
    blocks as ``runs`` holds: one case's rounds, back to back."""
    return [spread(list(runs[i : i + 15])) for i in range(0, len(runs) - 14, 15)]


def _report(name: str, runs: list[float], seconds: float) -> None:
    blocks = sorted(_blocks(runs))
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
    return statistics.correlation(a, b)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="fresh processes per arrangement")
    parser.add_argument(
        "--arrangements",
        nargs="+",
        choices=list(ARRANGEMENTS),
        default=["current", "no-quiet"],
        metavar="NAME",
        help=f"arrangements to compare (default: current no-quiet): {', '.join(ARRANGEMENTS)}",
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
        nargs="*",
        choices=list(PROBES),
        metavar="KIND",
        help="with --alone: alternate with loops without JAX, each timed as a run ("
        + "; ".join(f"{name}: {what}" for name, what in PROBES.items())
        + "; --probe alone: alu)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="with --alone: sample the process with perf; where the slow runs lost their time",
    )
    parser.add_argument(
        "--system-idle",
        action="store_true",
        help="with --alone: leave idle CPUs as the system sets them (the suite keeps them awake)",
    )
    parser.add_argument(
        "--simulate",
        nargs="?",
        const=Path("kernel-bench-results.json"),
        type=Path,
        metavar="RESULTS",
        help="with --alone: lay the suite's rounds, as several arrangements would order "
        "them, over the recorded runs (the cases and backends of a kernel-bench results file; "
        "default kernel-bench-results.json)",
    )
    parser.add_argument(
        "--per-cpu",
        action="store_true",
        help="with --alone: pin every thread to each CPU in turn, a run each, and say how "
        "fast each CPU ran the reference op",
    )
    args = parser.parse_args(argv)
    if args.per_cpu and not hasattr(os, "sched_setaffinity"):
        parser.error("--per-cpu pins threads to CPUs, which this system does not offer")
    if args.alone is not None:
        if args.simulate is not None:
            try:
                _case_backends(args.simulate)
            except ValueError as exc:
                parser.error(f"--simulate: {exc}")
        probes = ["alu"] if args.probe == [] else list(dict.fromkeys(args.probe or ()))
        return alone(
            args.alone, probes, not args.system_idle, args.profile, args.simulate, args.per_cpu
        )
    if args.probe is not None or args.system_idle or args.profile or args.simulate or args.per_cpu:
        parser.error("--probe, --profile, --simulate, --per-cpu and --system-idle go with --alone")
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    extra = ["--quick"] if args.quick else []
    results: dict[str, list[list[float]]] = {a: [] for a in args.arrangements}
    backends: dict[str, list[list[float]]] = {a: [] for a in args.arrangements}
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
                spreads, backend_spreads, stretches = found
                print(
                    f"{name}, process {k + 1}: {_summary(spreads)}; backends' spread "
                    f"{_median(backend_spreads)}, {wall:.0f} s",
                    flush=True,
                )
                print(f"  {stretches}", flush=True)
                results[name].append(spreads)
                backends[name].append(backend_spreads)
    print(
        "\n| arrangement | cases at most 5 %, per process | spread over the cases, per process "
        "| backends' spread in program (median), per process |"
    )
    print("|---|---|---|---|")
    for name, per_process in results.items():
        counts = ", ".join(f"{sum(v <= 5 for v in f)} of {len(f)}" for f in per_process) or "-"
        spans = ", ".join(f"{min(f):.1f} to {max(f):.1f} %" for f in per_process) or "no result"
        medians = ", ".join(_median(f) for f in backends[name]) or "-"
        print(f"| {ARRANGEMENTS[name]} | {counts} | {spans} | {medians} |")
    return 0


def _median(found: list[float]) -> str:
    return f"{statistics.median(found):.1f} %" if found else "-"


def _summary(found: list[float]) -> str:
    at_most = sum(v <= 5 for v in found)
    return f"{min(found):.1f} to {max(found):.1f} %, {at_most} of {len(found)} cases at most 5 %"


if __name__ == "__main__":
    sys.exit(main())
