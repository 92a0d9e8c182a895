"""How quiet kernel-bench's instrument is: the reference op's spread
(interquartile range over median) in each case of the main job, with and
without the untimed pause before each timed run (``SETTLE_SECONDS``).

    uv run python tools/bench_instrument.py --processes 4            # the default run
    uv run python tools/bench_instrument.py --processes 4 --quick
    uv run python tools/bench_instrument.py --alone 20               # the machine's own noise

``--alone SECONDS`` measures the machine instead: one fresh process runs the
reference op's 1 ms chains back to back, nothing else, for that long, and
prints their spread over the whole time and over every 15 consecutive runs
(one case's rounds): the least spread the suite can report on this machine,
and the share of the CPUs other processes used meanwhile (from /proc/stat:
a spread with none used is the machine's, or on a virtual machine its host's).

Each process runs ``kernel-bench`` (``--quick`` passed on) with the pause set
to one of the values of ``--settle-ms`` (default: kernel-bench's own, none, and 2 ms),
the values alternating process by process, forward then reversed; each prints
the "machine noise" line the main job prints, which this script collects. Run
it on an idle machine: the point is what the instrument adds, not what other
jobs do.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

CHILD = """
import sys
from kernel_bench import _timing
_timing.SETTLE_SECONDS = float(sys.argv[1]) / 1000
from kernel_bench._cli import main
sys.argv = ["kernel-bench", *sys.argv[2:]]
main()
"""
ALONE = """
import sys, time
import jax, jax.numpy as jnp
from kernel_bench import _load, _program, _timing
meter = _load.OtherLoad()
run = _program._reference_run()
x = jnp.linspace(0.0, 1.0, _program.REFERENCE_SIZE, dtype=jnp.float32)
count = jnp.asarray(_timing.calls_per_run(run, (x,), _timing.SECONDS_PER_RUN), dtype=jnp.int32)
end = time.perf_counter() + float(sys.argv[1])
while time.perf_counter() < end:
    start = time.perf_counter()
    jax.block_until_ready(run(count, x))
    print(time.perf_counter() - start)
print("load", meter.share())
"""
NOISE = re.compile(r"spread \(IQR/median\) ([\d.]+)% to ([\d.]+)% over the cases")


def run(settle_ms: float, extra: list[str]) -> tuple[float, float] | None:
    """One fresh process of the main job: the least and the greatest spread of the
    reference op over its cases, in per cent, or None where it printed none."""
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(settle_ms), *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    found = NOISE.search(proc.stdout)
    if proc.returncode != 0 or found is None:
        print(proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
        return None
    return float(found.group(1)), float(found.group(2))


def spread(values: list[float]) -> float:
    """The interquartile range over the median, in per cent."""
    from kernel_bench._timing import Spread

    return 100 * Spread.of(values).relative_iqr


def alone(seconds: float) -> int:
    """The reference op alone for ``seconds``: its spread overall and per 15 runs."""
    proc = subprocess.run(
        [sys.executable, "-c", ALONE, str(seconds)], capture_output=True, text=True, check=True
    )
    lines = proc.stdout.splitlines()
    load = lines.pop().split()[1]
    runs = [float(line) for line in lines]
    blocks = sorted(spread(runs[i : i + 15]) for i in range(0, len(runs) - 14, 15))
    over = sum(b > 5 for b in blocks)
    print(f"{len(runs)} runs of {1e3 * sorted(runs)[len(runs) // 2]:.3f} ms (median)")
    print(f"spread over the whole {seconds:g} s: {spread(runs):.1f}%")
    print(
        f"spread over 15 consecutive runs ({len(blocks)} blocks): median "
        f"{blocks[len(blocks) // 2]:.1f}%, 90th percentile {blocks[int(0.9 * len(blocks))]:.1f}%, "
        f"most {blocks[-1]:.1f}%; above 5% in {over} ({100 * over / len(blocks):.0f}%)"
    )
    others = "unknown" if load == "None" else f"{100 * float(load):.1f}% of the CPUs"
    print(f"other processes meanwhile: {others}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from kernel_bench._timing import SETTLE_SECONDS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="fresh processes per value")
    parser.add_argument(
        "--settle-ms",
        type=float,
        nargs="+",
        default=[SETTLE_SECONDS * 1000, 2.0],
        help="pauses to compare, in milliseconds (default: kernel-bench's own and 2)",
    )
    parser.add_argument("--quick", action="store_true", help="kernel-bench --quick")
    parser.add_argument(
        "--alone", type=float, metavar="SECONDS", help="time the reference op alone this long"
    )
    args = parser.parse_args(argv)
    if args.alone is not None:
        return alone(args.alone)
    extra = ["--quick"] if args.quick else []
    results: dict[float, list[tuple[float, float]]] = {v: [] for v in args.settle_ms}
    order = list(args.settle_ms)
    for k in range(args.processes):
        for value in order if k % 2 == 0 else order[::-1]:
            found = run(value, extra)
            print(f"settle {value:g} ms, process {k + 1}: {found}", flush=True)
            if found is not None:
                results[value].append(found)
    print("\n| pause before each run | reference op spread over the cases, per process |")
    print("|---|---|")
    for value, found in results.items():
        spans = ", ".join(f"{lo:.1f} to {hi:.1f} %" for lo, hi in found) or "no result"
        print(f"| {value:g} ms | {spans} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
