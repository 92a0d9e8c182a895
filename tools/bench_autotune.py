"""Backend "auto" on kernel-bench's bundled suite, against every fixed backend.

Run: ``uv run python tools/bench_autotune.py`` (``--quick``: the quick scale and
fewer rounds; ``--rounds N``: N timed rounds; ``--run-seconds S``: timed runs of
about S seconds; ``--reverse``: time the backends in the other order; ``--json``).

1. suite: every case of every operation of the suite (default scale), timed on
   each backend registered for the CPU and on ``"auto"``. Each candidate is a
   chain of calls in one compiled program (kernel-bench's engine), the
   candidates interleaved round by round (a warm-up round first, the order
   shuffled every round); the figure is
   the least time per call over the rounds (the autotuner itself ranks by
   medians). ``auto`` decides in this process, from an empty cache
   (a temporary directory), so its first lowering measures. Per case: the
   best fixed backend, auto's choice, chosen / best, auto / chosen and auto /
   best (goal: at most 1.05).
   Over the suite: the sum of the per-call times of every case, for auto and
   for each backend registered for every operation (what a single fixed
   default would cost), and for auto's choices timed as fixed backends.
2. lowering: the cost of a decision already made, at lowering time: lowering a
   new jit of ``axpy`` with ``backend="auto"`` against ``backend="numba"``,
   interleaved.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

# The tool is the program: it may point the autotune cache at a fresh place,
# and quiet Warp, whose banner and module lines (printed when the examples are
# imported) would go into the output and the JSON. The libraries never do
# either on import.
os.environ["KERNEL_BENCH_AUTOTUNE_DIR"] = tempfile.mkdtemp(prefix="bench-autotune-")
try:
    import warp

    warp.config.log_level = warp.LOG_WARNING
except ImportError:
    pass

import jax
import jax.numpy as jnp
from kernel_bench import autotune
from kernel_bench._timing import calls_per_run, chained, interleaved
from kernel_bench.examples import example_kernels, set_scale

_RUN_S = 0.02  # target length of one timed run


def time_case(
    kernel: Any, cfg: Any, rounds: int, reverse: bool, run_s: float = _RUN_S
) -> dict[str, Any]:
    backends = [*kernel.available_backends("cpu"), "auto"]
    if reverse:
        backends.reverse()
    data = tuple(jax.device_put(cfg.args))
    runs, counts = {}, {}
    with autotune.recording() as found:
        for b in backends:
            runs[b] = chained(functools.partial(kernel.call, backend=b, **cfg.kernel_kwargs))
            counts[b] = calls_per_run(runs[b], data, run_s, most=100_000)
    times = interleaved(runs, counts, data, rounds=rounds)
    us = {b: min(t) for b, t in times.items()}
    fixed = {b: t for b, t in us.items() if b != "auto"}
    best = min(fixed, key=fixed.__getitem__)
    chosen = sorted({d.backend for d in found})
    chosen_us = min(us[b] for b in chosen)
    return {
        "case": f"{kernel.name}/{cfg.name}",
        "us_per_call": us,
        "best": best,
        "auto_chose": chosen,
        "auto_over_best": us["auto"] / us[best],
        # The choice judged by the chosen backend's own column: the quality
        # of the decision, free of the difference between two compiled
        # programs running the same code (auto_over_chosen).
        "chosen_over_best": chosen_us / us[best],
        "auto_over_chosen": us["auto"] / chosen_us,
    }


def bench_suite(scale: str, rounds: int, reverse: bool, run_s: float = _RUN_S) -> dict[str, Any]:
    set_scale(scale)
    kernels = example_kernels()
    cases = [
        time_case(k, cfg, rounds, reverse, run_s)
        for k in kernels
        for cfg in k.benchmark_data(platform="cpu")
    ]
    everywhere = [
        b
        for b in kernels[0].available_backends("cpu")
        if all(b in k.available_backends("cpu") for k in kernels)
    ]
    totals = {b: sum(c["us_per_call"][b] for c in cases) for b in [*everywhere, "auto"]}
    totals["auto's choices"] = sum(c["us_per_call"]["auto"] / c["auto_over_chosen"] for c in cases)
    return {
        "cases": cases,
        "totals_us": totals,
        "worst_auto_over_best": max(c["auto_over_best"] for c in cases),
        "worst_chosen_over_best": max(c["chosen_over_best"] for c in cases),
        "auto_over_chosen_range": [
            min(c["auto_over_chosen"] for c in cases),
            max(c["auto_over_chosen"] for c in cases),
        ],
    }


def bench_lowering(rounds: int, inner: int = 20) -> dict[str, float]:
    from kernel_bench.examples import axpy

    x = jnp.ones(1000, jnp.float32)
    a = jnp.ones(1, jnp.float32)
    jax.jit(functools.partial(axpy.call, backend="auto")).lower(x, x, a)  # decide once

    def lower(backend: str) -> float:
        start = time.perf_counter()
        for _ in range(inner):
            # A new function each time: JAX's caches do not hold its lowering.
            jax.jit(lambda x, y, a: axpy.call(x, y, a, backend=backend)).lower(x, x, a)
        return (time.perf_counter() - start) / inner * 1e6

    lower("auto"), lower("numba")  # warm
    times: dict[str, list[float]] = {"auto": [], "numba": []}
    for _ in range(rounds):
        for b in times:
            times[b].append(lower(b))
    us = {b: statistics.median(t) for b, t in times.items()}
    # The lookup alone, as the lowering rule makes it.
    avals = [jax.core.ShapedArray(v.shape, v.dtype) for v in (x, x, a)]
    lookup = functools.partial(autotune.decide, axpy, "cpu", avals, avals[:1], False, ())
    start = time.perf_counter()
    for _ in range(10_000):
        lookup()
    lookup_us = (time.perf_counter() - start) / 10_000 * 1e6
    return {
        "auto_us": us["auto"],
        "numba_us": us["numba"],
        "overhead_us": us["auto"] - us["numba"],
        "lookup_us": lookup_us,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="the quick scale, fewer rounds")
    parser.add_argument(
        "--rounds",
        type=int,
        help="timed rounds of the suite and of the lowering (default: 15, 5 with --quick)",
    )
    parser.add_argument(
        "--run-seconds",
        type=float,
        default=_RUN_S,
        help="target length of one timed run of the suite (default: %(default)s)",
    )
    parser.add_argument("--reverse", action="store_true", help="time the backends in reverse order")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.run_seconds <= 0:
        parser.error("--run-seconds must be positive")
    rounds = args.rounds or (5 if args.quick else 15)
    results = {
        "suite": bench_suite(
            "quick" if args.quick else "default", rounds, args.reverse, args.run_seconds
        ),
        "lowering": bench_lowering(rounds),
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    suite = results["suite"]
    for c in suite["cases"]:
        cells = "  ".join(f"{b} {t:9.2f}" for b, t in c["us_per_call"].items())
        print(
            f"{c['case']:<32} us/call: {cells}  | best {c['best']}, auto chose "
            f"{'+'.join(c['auto_chose'])}, chosen/best {c['chosen_over_best']:.3f}, "
            f"auto/best {c['auto_over_best']:.3f}, auto/chosen {c['auto_over_chosen']:.3f}"
        )
    totals = "  ".join(f"{b} {t:.1f}" for b, t in suite["totals_us"].items())
    print(f"suite total us/call (one call of every case): {totals}")
    low, high = suite["auto_over_chosen_range"]
    print(
        f"worst chosen/best {suite['worst_chosen_over_best']:.3f}, worst auto/best "
        f"{suite['worst_auto_over_best']:.3f}; auto/chosen (one backend, two compiled "
        f"programs) from {low:.3f} to {high:.3f}"
    )
    low = results["lowering"]
    print(
        f"lowering a new jit of axpy: auto (decided) {low['auto_us']:.0f} us, numba "
        f"{low['numba_us']:.0f} us, difference {low['overhead_us']:.1f} us; the lookup of a "
        f"decision in memory alone: {low['lookup_us']:.1f} us"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
