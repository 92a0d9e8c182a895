"""What code compiled for a portable CPU model costs against this machine's own.

Run: ``uv run python tools/bench_portable_cpu.py`` (``--processes N``,
``--models generic x86-64-v3 ...``; ``--json FILE`` to keep the figures).

A prebuilt directory built with ``python -m numba_cpu_ffi.prebuild ... --cpu
MODEL`` holds code for a portable CPU model (``ffi_core.abi.native.PORTABLE_CPUS``)
that loads on every machine running it. This tool times three kernels,
Numba alone, compiled for this machine's model ("host") and for each portable
model this machine runs: in fresh processes whose Numba compiles for that
model (``NUMBA_CPU_NAME=MODEL NUMBA_CPU_FEATURES=""``, what the prebuild's
workers get), the models in alternating order (A B C ..., then ... C B A).
Each figure is the median over 15 rounds of 20 calls in a process; the table
gives the median over the processes and their range, in microseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from ffi_core.abi.native import portable_cpus

_KERNELS = """
import json, math, statistics, time
import numba, numpy as np


@numba.njit
def add(x, y, out):
    for i in range(x.size):
        out[i] = x[i] + y[i]


@numba.njit
def lif_step(v, current, out):
    for k in range(v.size):
        nv = v[k] + (current[k] - v[k]) * 0.01
        out[k] = 0.0 if nv > 1.0 else nv * math.exp(-0.1)


@numba.njit
def row_dot(a, b, out):
    for r in range(a.shape[0]):
        s = 0.0
        for c in range(a.shape[1]):
            s += a[r, c] * b[r, c]
        out[r] = s


rng = np.random.default_rng(0)
n = 1 << 20
x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
a, b = rng.random((n // 16, 16)), rng.random((n // 16, 16))
cases = {
    "add of 2^20 float32": (add, (x, y, np.empty_like(x))),
    "LIF step of 2^20 float32 (exp, a branch)": (lif_step, (x, y, np.empty_like(x))),
    "65,536 row dot products of 16 float64": (row_dot, (a, b, np.empty(n // 16))),
}
found = {}
for name, (kernel, args) in cases.items():
    kernel(*args)
    rounds = []
    for _ in range(15):
        start = time.perf_counter()
        for _ in range(20):
            kernel(*args)
        rounds.append((time.perf_counter() - start) / 20 * 1e6)
    found[name] = statistics.median(rounds)
print(json.dumps(found))
"""


def _run(model: str) -> dict[str, float]:
    env = dict(os.environ)
    if model != "host":
        env |= {"NUMBA_CPU_NAME": model, "NUMBA_CPU_FEATURES": ""}
    out = subprocess.run(
        [sys.executable, "-c", _KERNELS], env=env, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="fresh processes per model")
    parser.add_argument(
        "--models",
        nargs="+",
        default=["host", *portable_cpus()],
        help="'host' and portable models this machine runs (default: all of them)",
    )
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    unknown = [m for m in args.models if m != "host" and m not in portable_cpus()]
    if unknown:
        parser.error(f"--models: this machine does not run {unknown}; it runs {portable_cpus()}")
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in args.models}
    for k in range(args.processes):
        for model in args.models if k % 2 == 0 else args.models[::-1]:
            runs[model].append(_run(model))
    cases = list(next(iter(runs.values()))[0])
    print(f"median µs per call over {args.processes} processes [range]; Numba alone")
    width = max(map(len, cases))
    print(f"{'kernel':{width}}  " + "  ".join(f"{m:>20}" for m in args.models))
    for case in cases:
        cells = []
        for model in args.models:
            values = [run[case] for run in runs[model]]
            cells.append(
                f"{statistics.median(values):7.1f} [{min(values):.0f}-{max(values):.0f}]".rjust(20)
            )
        print(f"{case:{width}}  " + "  ".join(cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
