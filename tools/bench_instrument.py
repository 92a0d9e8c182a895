"""How quiet kernel-bench's instrument is: the reference op's spread
(interquartile range over median) in each case of the main job, with and
without the untimed pause before each timed run (``SETTLE_SECONDS``).

    uv run python tools/bench_instrument.py --processes 4            # the default run
    uv run python tools/bench_instrument.py --processes 4 --quick

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
    args = parser.parse_args(argv)
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
