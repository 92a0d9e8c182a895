"""How a threaded numba kernel and XLA's threaded op share two cores over time.

Run: ``uv run python tools/bench_thread_states.py`` (``--processes N``,
``--windows W``, ``--n ELEMENTS``).

Each fresh process compiles the bundled ``axpy`` example's ``numba`` backend
(a ``prange`` kernel, threaded at this size) and its ``jax`` backend (XLA's
fused elementwise loop, threaded by XLA's own pool), calibrates their chains
as the autotuner does (``kernel_bench._timing.calls_per_run``) and then times
them in interleaved windows of about 0.1 s each, as the autotuner's
``interleaved`` rounds do. Each line is one window: the median microseconds
per call of each backend. A window is about half of the autotuner's default
budget, so what changes between windows changes between two decisions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

_CHILD = textwrap.dedent(
    """
    import functools, json, statistics, sys, time
    import jax, jax.numpy as jnp, numpy as np
    from kernel_bench._timing import SECONDS_PER_RUN, calls_per_run, chained, interleaved
    from kernel_bench.examples._axpy import axpy

    n, windows = int(sys.argv[1]), int(sys.argv[2])
    rng = np.random.default_rng(0)
    x, y = (jnp.asarray(rng.standard_normal(n, dtype=np.float32)) for _ in range(2))
    data = (x, y, jnp.asarray(np.array([0.5], np.float32)))
    runs = {b: chained(functools.partial(axpy.call, backend=b)) for b in ("numba", "jax")}
    for run in runs.values():
        jax.block_until_ready(run(jnp.asarray(1, jnp.int32), *data))
    counts = {b: calls_per_run(run, data, SECONDS_PER_RUN) for b, run in runs.items()}
    start, lines = time.perf_counter(), []
    for w in range(windows):
        times = interleaved(runs, counts, data, rounds=30, seconds=0.1, seed=w)
        medians = {b: statistics.median(t) for b, t in times.items()}
        lines.append({"t": time.perf_counter() - start, **medians})
    print(json.dumps({"counts": counts, "windows": lines}))
    """
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=3, help="fresh processes")
    parser.add_argument("--windows", type=int, default=8, help="windows of about 0.1 s each")
    parser.add_argument("--n", type=int, default=1_000_000, help="elements of each vector")
    args = parser.parse_args()
    for p in range(args.processes):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(args.n), str(args.windows)],
            env=dict(os.environ),
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"process {p + 1}: calls per run {result['counts']}")
        for line in result["windows"]:
            ratio = line["numba"] / line["jax"]
            print(
                f"  t={line['t']:5.2f} s  numba {line['numba']:7.1f} us  jax {line['jax']:7.1f} us"
                f"  numba/jax {ratio:.2f}"
            )


if __name__ == "__main__":
    main()
