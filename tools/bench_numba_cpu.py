"""Benchmarks of numba-cpu-ffi against XLA's own ops on this machine.

Run: ``uv run python tools/bench_numba_cpu.py`` (``--quick`` for a short run;
``--keep-cpus-awake`` to time with idle CPUs kept awake, as ``kernel-bench``
does where it may).

Each comparison runs its candidates in interleaved rounds (A, B, A, B, ...) so
that machine noise hits both alike, and reports the median time of each and the
median of the per-round ratios. The group ``add_2pow20_profile`` (in every full
run) samples the 2^20 add (ours, ``jnp.add``, Numba alone) with perf on its
software clock (``_perf.py``; perf must be installed and allowed to sample the
process, else it says it cannot). ``--only GROUP ...`` runs some groups,
``--reverse`` runs them in reverse order, ``--json FILE`` also writes the
results, ``--no-cost-hint`` leaves large calls without their cost hint.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable

import _perf
import jax
import jax.numpy as jnp
import numba
import numpy as np
from kernel_bench._awake import keep_cpus_awake
from numba_cpu_ffi import _primitive as numba_primitive
from numba_cpu_ffi import numba_kernel, parallel_min_elements


@numba.njit
def add(x, y, out):
    for i in range(x.size):
        out[i] = x[i] + y[i]


@numba.njit
def add_rows(x, y, out):
    for i in range(x.shape[0]):
        out[i] = x[i] + y[i]


def _time(fn: Callable[[], object], inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        out = fn()
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / inner


def interleaved(cands: dict[str, Callable[[], object]], rounds: int, inner: int) -> dict:
    for fn in cands.values():  # compile and warm up
        jax.block_until_ready(fn())
        _time(fn, inner)
    times: dict[str, list[float]] = {k: [] for k in cands}
    for _ in range(rounds):
        for name, fn in cands.items():
            times[name].append(_time(fn, inner))
    names = list(cands)
    base = names[0]
    result = {f"{k}_us": statistics.median(v) * 1e6 for k, v in times.items()}
    for other in names[1:]:
        ratios = [a / b for a, b in zip(times[base], times[other], strict=True)]
        result[f"ratio_{base}_over_{other}"] = statistics.median(ratios)
    return result


def bench_tiny(rounds: int) -> dict:
    x = jnp.arange(16, dtype=jnp.float32)
    f = jax.jit(numba_kernel(add, jax.ShapeDtypeStruct(x.shape, x.dtype)))
    g = jax.jit(jnp.add)
    return interleaved({"numba": lambda: f(x, x), "jnp": lambda: g(x, x)}, rounds, 2000)


def bench_chain(rounds: int, n: int = 1000) -> dict:
    x = jnp.arange(16, dtype=jnp.float32)
    k = numba_kernel(add, jax.ShapeDtypeStruct(x.shape, x.dtype))

    @jax.jit
    def chain_numba(x):
        for _ in range(n):
            x = k(x, x)
        return x

    @jax.jit
    def chain_empty(x):
        return x

    res = interleaved(
        {"chain": lambda: chain_numba(x), "empty": lambda: chain_empty(x)}, rounds, 20
    )
    res["per_call_us"] = (res["chain_us"] - res["empty_us"]) / n
    return res


@numba.njit(parallel=True)
def add_parallel(x, y, out):
    for i in numba.prange(x.size):
        out[i] = x[i] + y[i]


def faults_per_call(fn: Callable[[], object], calls: int = 20) -> float:
    """Minor page faults per call, dispatched as the timings are (``calls``
    calls, then one wait): a fresh output buffer is paid page by page."""
    jax.block_until_ready(fn())
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        out = fn()
    jax.block_until_ready(out)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def schedstat_total(field: int) -> int | None:
    """One field of Linux's scheduler statistics summed over this process's
    threads (``/proc/self/task/*/schedstat``: 0, nanoseconds on a CPU; 2,
    times scheduled onto one); a thread that ends meanwhile is left out;
    None where the files cannot be read."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    total = 0
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/schedstat") as f:
                total += int(f.read().split()[field])
        except (OSError, ValueError, IndexError):
            continue
    return total


def cpus_busy(fn: Callable[[], object], calls: int = 200) -> str:
    """How many CPUs a call keeps busy: the CPU time all the process's threads
    used per call over ``calls`` calls, dispatched as the timings are, over
    the wall time per call (:func:`schedstat_total`, read before and after,
    so the calls run undisturbed); "unknown" where it cannot be read. A
    serial kernel keeps one CPU busy, and the thread that launches the calls
    a little of another; XLA's own add of 2^20 elements splits over its
    threads."""
    jax.block_until_ready(fn())
    before, start = schedstat_total(0), time.perf_counter()
    for _ in range(calls):
        out = fn()
    jax.block_until_ready(out)
    wall, after = (time.perf_counter() - start) / calls, schedstat_total(0)
    if before is None or after is None:
        return "unknown"
    cpu = (after - before) / 1e9 / calls
    return f"{cpu / wall:.2f} CPUs ({cpu * 1e6:.0f} us of CPU time in {wall * 1e6:.0f} us a call)"


def bench_large(rounds: int) -> dict:
    x = jnp.asarray(np.random.default_rng(0).random(2**20, dtype=np.float32))
    y = x + 1
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    op = numba_kernel(add, out)
    cands = {
        "numba": jax.jit(op),
        "jnp": jax.jit(jnp.add),
        "numba_prange": jax.jit(numba_kernel(add_parallel, out)),
        # The same add in a program with 1,000+ flops of other work: XLA then
        # runs it off the calling thread (see docs/performance.md).
        "numba_in_program": jax.jit(lambda x, y: (op(x, y), jnp.sum(x[:1024]))),
        "jnp_in_program": jax.jit(lambda x, y: (x + y, jnp.sum(x[:1024]))),
    }
    timed = {k: (lambda f=f: f(x, y)) for k, f in cands.items()}
    # The floor: the same serial kernel called by Numba alone, on NumPy arrays
    # (its output written in place), without JAX.
    xs, ys = np.asarray(x), np.asarray(y)
    os_ = np.empty_like(xs)
    timed["numba_alone"] = lambda: add(xs, ys, os_)
    res = interleaved(timed, rounds, 20)
    res["ratio_of_medians_in_program"] = res["numba_in_program_us"] / res["jnp_in_program_us"]
    res["ratio_of_medians_numba_over_numba_alone"] = res["numba_us"] / res["numba_alone_us"]
    for k, f in cands.items():
        res[f"{k}_page_faults_per_call"] = faults_per_call(lambda f=f: f(x, y))
    for k in ("numba", "jnp", "numba_prange", "numba_alone"):
        res[f"{k}_cpus_busy"] = cpus_busy(timed[k])
    return res


def bench_parallel_small(rounds: int, n: int = 10_000) -> dict:
    """A ``prange`` kernel on a small array: it must not pay thread wake-up."""
    x = jnp.asarray(np.random.default_rng(0).random(n, dtype=np.float32))
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    f = jax.jit(numba_kernel(add_parallel, out))
    g = jax.jit(jnp.add)
    return interleaved({"numba_prange": lambda: f(x, x), "jnp": lambda: g(x, x)}, rounds, 200)


def bench_vmap(rounds: int, rows: int, cols: int) -> dict:
    x = jnp.asarray(np.random.default_rng(0).random((rows, cols), dtype=np.float32))
    row = jax.ShapeDtypeStruct((cols,), jnp.float32)
    flat = jax.ShapeDtypeStruct((rows * cols,), jnp.float32)
    fv = jax.jit(jax.vmap(numba_kernel(add_rows, row)))
    ff = jax.jit(numba_kernel(add_rows, flat))
    xf = x.reshape(-1)
    inner = max(10, 2_000_000 // (rows * cols))
    res = interleaved({"vmap": lambda: fv(x, x), "flat": lambda: ff(xf, xf)}, rounds, inner)
    # The same calls chained 100 times in one program: the handlers' own
    # cost, without a dispatch per call (times are per chain of 100).
    kv, kf = jax.vmap(numba_kernel(add_rows, row)), numba_kernel(add_rows, flat)
    cv = jax.jit(lambda a: jax.lax.fori_loop(0, 100, lambda i, c: kv(c, a), a))
    cf = jax.jit(lambda a: jax.lax.fori_loop(0, 100, lambda i, c: kf(c, a), a))
    chains = {"vmap_chain100": lambda: cv(x), "flat_chain100": lambda: cf(xf)}
    return res | interleaved(chains, rounds, max(1, inner // 100))


@numba.njit
def gather_add(x, idx, out):
    # An indexed kernel (what bounds checks cost most on): out[i] = x[idx[i]] + 1.
    for i in range(idx.size):
        out[i] = x[idx[i]] + 1


def bench_boundscheck(rounds: int) -> dict:
    """The cost of ``boundscheck=True``: the 2^20 add and an indexed gather,
    each with and without bounds checks, and a tiny call."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.random(2**20, dtype=np.float32))
    idx = jnp.asarray(rng.integers(0, x.size, x.size, dtype=np.int32))
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    tiny = x[:16]
    tiny_out = jax.ShapeDtypeStruct(tiny.shape, tiny.dtype)
    res = {}
    for label, kernel, args, outs, inner in (
        ("add_2pow20", add, (x, x), out, 20),
        ("gather_2pow20", gather_add, (x, idx), out, 20),
        ("tiny_16", add, (tiny, tiny), tiny_out, 2000),
    ):
        plain = jax.jit(numba_kernel(kernel, outs, boundscheck=False))
        checked = jax.jit(numba_kernel(kernel, outs, boundscheck=True))
        r = interleaved(
            {"plain": lambda f=plain, a=args: f(*a), "checked": lambda f=checked, a=args: f(*a)},
            rounds,
            inner,
        )
        res |= {f"{label}_{k}": v for k, v in r.items()}
    return res


def bench_wake(rounds: int) -> dict:
    """Numba alone: a prange kernel against its serial twin, by size (the cost of
    waking threads that ``parallel_min_elements`` is derived from)."""

    @numba.njit
    def serial(x, y, out):
        for i in range(x.size):
            out[i] = x[i] + y[i]

    res = {}
    for n in (10_000, 100_000, 300_000, 1_000_000):
        x = np.random.default_rng(0).random(n, dtype=np.float32)
        o = np.empty_like(x)
        r = interleaved(
            {
                "prange": lambda x=x, o=o: add_parallel(x, x, o),
                "serial": lambda x=x, o=o: serial(x, x, o),
            },
            rounds,
            max(10, 10_000_000 // n),
        )
        res[f"n={n}_prange_us"] = r["prange_us"]
        res[f"n={n}_serial_us"] = r["serial_us"]
    return res


_COMPILE_SCRIPT = textwrap.dedent(
    """
    import time
    t0 = time.perf_counter()
    import jax, jax.numpy as jnp, numba
    from numba_cpu_ffi import numba_kernel, parallel_min_elements
    @numba.njit
    def scale_add(x, y, out):
        for i in range(x.size):
            out[i] = 2.0 * x[i] + y[i]
    x = jnp.ones(8, jnp.float32)
    t1 = time.perf_counter()
    jax.block_until_ready(jax.jit(numba_kernel(scale_add, jax.ShapeDtypeStruct(x.shape, x.dtype)))(x, x))
    t2 = time.perf_counter()
    print(t1 - t0, t2 - t1)
    """
)


def bench_compile() -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CPU_FFI_CACHE_DIR": cache}
        runs = []
        for _ in range(2):
            out = subprocess.run(
                [sys.executable, "-c", _COMPILE_SCRIPT],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()
            runs.append(float(out[1]))
    return {"first_call_cold_s": runs[0], "first_call_warm_cache_s": runs[1]}


_HERE = os.path.dirname(os.path.abspath(__file__))
_WAIT_POLICY_SCRIPT = textwrap.dedent(
    """
    import statistics, sys, time
    sys.path.insert(0, sys.argv[3])  # this tool's directory: its kernels
    import jax, jax.numpy as jnp
    from bench_numba_cpu import add, add_parallel, schedstat_total
    from kernel_bench._timing import chained
    from numba_cpu_ffi import numba_kernel

    def scheduled():
        # Times this process's threads were scheduled onto a CPU, all told.
        return schedstat_total(2) or 0

    rounds, calls = int(sys.argv[1]), int(sys.argv[2])
    x = jnp.ones(2**20, jnp.float32)
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    runs = {"prange": chained(numba_kernel(add_parallel, out)), "serial": chained(numba_kernel(add, out))}
    count = jnp.asarray(calls, jnp.int32)
    times = {k: [] for k in runs}
    switches = 0
    for run in runs.values():
        for _ in range(3):
            jax.block_until_ready(run(count, x, x))
    for _ in range(rounds):
        for name, run in runs.items():
            before = scheduled()
            start = time.perf_counter()
            jax.block_until_ready(run(count, x, x))
            times[name].append((time.perf_counter() - start) / calls)
            if name == "prange":
                switches += scheduled() - before
    prange, serial = (statistics.median(times[k]) for k in runs)
    print(prange, serial, switches / (rounds * calls))
    """
)


def bench_wait_policy(rounds: int, processes: int = 2) -> dict:
    """A chain of 2^20-element adds in one program (``calls`` calls, as a
    ``scan`` or a loop makes), the ``prange`` kernel against its serial twin,
    in fresh processes under each OpenMP wait policy (read once, when the
    runtime loads), the policies alternating: the median time per call, and
    how often the process's threads were scheduled per threaded call (each
    wake of a sleeping worker is one). A CPU wake-up latency request held by
    this process (``--keep-cpus-awake``) holds for the children too."""
    policies = ["unset", "ACTIVE", "PASSIVE"]
    found: dict[str, list[list[float]]] = {p: [] for p in policies}
    for number in range(processes):
        for policy in policies if number % 2 == 0 else policies[::-1]:
            env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
            if policy != "unset":
                env["OMP_WAIT_POLICY"] = policy
            out = subprocess.run(
                [sys.executable, "-c", _WAIT_POLICY_SCRIPT, str(rounds), "20", _HERE],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()
            found[policy].append([float(v) for v in out])
    res = {}
    for policy, rows in found.items():
        for k, (prange_s, serial_s, switches) in enumerate(rows):
            res[f"{policy}_p{k}_prange_us"] = prange_s * 1e6
            res[f"{policy}_p{k}_serial_us"] = serial_s * 1e6
            res[f"{policy}_p{k}_prange_over_serial"] = prange_s / serial_s
            res[f"{policy}_p{k}_scheduled_per_threaded_call"] = switches
    return res


_ADD_PROFILE_SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    sys.path.insert(0, sys.argv[2])  # this tool's directory: its kernels
    import jax, jax.numpy as jnp, numpy as np
    from bench_numba_cpu import add
    from numba_cpu_ffi import numba_kernel

    calls = int(sys.argv[1])
    x = jnp.asarray(np.random.default_rng(0).random(2**20, dtype=np.float32))
    y = x + 1
    op = jax.jit(numba_kernel(add, jax.ShapeDtypeStruct(x.shape, x.dtype)))
    add_jnp = jax.jit(jnp.add)
    xs, ys = np.asarray(x), np.asarray(y)
    os_ = np.empty_like(xs)
    cands = {
        "numba": lambda: op(x, y),
        "jnp": lambda: add_jnp(x, y),
        "numba_alone": lambda: add(xs, ys, os_),
    }
    print("pid", os.getpid())
    for fn in cands.values():
        for _ in range(50):
            out = fn()
        jax.block_until_ready(out)
    for name, fn in cands.items():
        start = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        for _ in range(calls):
            out = fn()
        jax.block_until_ready(out)
        print(name, start, time.clock_gettime_ns(time.CLOCK_MONOTONIC))
    """
)


def bench_add_profile(calls: int) -> dict:
    """Where a call of the 2^20 add spends its CPU time: ``calls`` calls of
    our serial kernel, of ``jnp.add`` and of the kernel by Numba alone (on
    NumPy arrays), one after the other in a fresh process sampled by perf on
    its software clock (``_perf``); per call, the wall time and the CPU time
    of each kind of code on the calling thread and on the others (XLA's
    workers), where at least 1 us. The compiled code is the loop itself
    (Numba's or XLA's: both are JIT code to perf)."""
    if not _perf.can_sample():
        return {"perf": "cannot sample processes here"}
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "perf.data")
        child = [sys.executable, "-c", _ADD_PROFILE_SCRIPT, str(calls), _HERE]
        lines = subprocess.run(
            [*_perf.RECORD, "-o", data, "--", *child], check=True, capture_output=True, text=True
        ).stdout.splitlines()
        found = _perf.samples(data)
    pid = int(lines[0].split()[1])
    res: dict[str, object] = {}
    for line in lines[1:]:
        name, start, end = line.split()
        res[f"{name}_us_per_call"] = (int(end) - int(start)) / 1e3 / calls
        for (thread, kind), n in _perf.per_window(found, int(start), int(end), pid).most_common():
            us = n / _perf.FREQUENCY / calls * 1e6
            if us >= 1:
                res[f"{name}: {kind}, {thread}"] = f"{us:.1f} us"
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--reverse", action="store_true", help="run the groups in reverse order")
    parser.add_argument("--only", nargs="+", metavar="GROUP", help="run only these groups")
    parser.add_argument(
        "--keep-cpus-awake",
        action="store_true",
        help="hold a CPU wake-up latency request of 0 us while timing, as kernel-bench does "
        "(where /dev/cpu_dma_latency is writable)",
    )
    parser.add_argument(
        "--no-cost-hint",
        action="store_true",
        help="lower large calls without their cost hint, to see what the hint removes",
    )
    args = parser.parse_args()
    rounds = 5 if args.quick else 21
    if args.no_cost_hint:
        numba_primitive.HINT_MIN_ELEMENTS = 2**62  # read at each lowering
    groups: dict[str, Callable[[], dict]] = {
        "tiny_16_floats": lambda: bench_tiny(rounds),
        "chain_1000_tiny_calls": lambda: bench_chain(max(3, rounds // 3)),
        "add_2pow20_float32": lambda: bench_large(rounds),
        "prange_kernel_10k_vs_jnp": lambda: bench_parallel_small(rounds),
        "vmap_64x1000_vs_flat": lambda: bench_vmap(rounds, 64, 1000),
        "vmap_4096x16_vs_flat": lambda: bench_vmap(rounds, 4096, 16),
        "vmap_8x100000_vs_flat": lambda: bench_vmap(rounds, 8, 100_000),
        "vmap_64x8192_vs_flat": lambda: bench_vmap(rounds, 64, 8192),
        "parallel_threshold": lambda: bench_wake(rounds),
        "boundscheck_cost": lambda: bench_boundscheck(rounds),
        "wait_policy": lambda: bench_wait_policy(5 * rounds),
        "add_2pow20_profile": lambda: bench_add_profile(1000 if args.quick else 5000),
    }
    unknown = set(args.only or ()) - set(groups)
    if unknown:
        parser.error(f"--only: unknown groups {sorted(unknown)}; known: {', '.join(groups)}")
    order = [g for g in groups if not args.only or g in args.only]
    order = order[::-1] if args.reverse else order
    with keep_cpus_awake(args.keep_cpus_awake) as awake:
        results = {name: groups[name]() for name in order}
    if not args.only:
        results["compile_first_call"] = bench_compile()
    results |= {
        "machine": {
            "cpus": os.cpu_count(),
            "numba_threads": numba.config.NUMBA_NUM_THREADS,
            "parallel_min_elements": parallel_min_elements(),
            "jax": jax.__version__,
            "numba": numba.__version__,
            "cost_hint": not args.no_cost_hint,
            "cpu_idle": awake.describe(),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
        },
    }
    for name, res in results.items():
        print(f"{name}:")
        for k, v in res.items():
            print(f"  {k:34s} {v:.4g}" if isinstance(v, float) else f"  {k:34s} {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
