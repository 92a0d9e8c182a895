"""How a parallel (``prange``) numba kernel's time spreads when XLA calls it
from several threads, under OpenMP's default wait policy and under
``OMP_WAIT_POLICY=PASSIVE`` (``numba_cpu_ffi.configure_threads()``).

    uv run python tools/bench_omp_teams.py --processes 2

XLA's CPU client runs a large call on one of its worker threads, not always
the same one. GNU OpenMP keeps one team of workers per thread that starts a
parallel region, so a process can hold several teams; under the default
policy a team's idle workers spin for a while after each region, and on a
small machine they compete with the next region's team. Each fresh process
(the policies alternating, forward then reversed) times 60 in-program runs
of a ``prange`` kernel on 2^21 float32 (each after a run of a small jnp op,
as in the suite's rounds) and counts the threads that started its parallel
region (the team leaders, read with ``gettid``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

CHILD = """
import ctypes, time
import jax, jax.numpy as jnp, numpy as np, numba
from numba import prange
import numba_cpu_ffi
from kernel_bench._timing import chained

syscall = ctypes.CDLL(None).syscall
syscall.restype, syscall.argtypes = ctypes.c_long, [ctypes.c_long]
SYS_GETTID = 186  # x86-64


@numba.njit(parallel=True)
def work(x, out, leaders):
    for i in prange(x.size):
        out[i] = np.sin(x[i]) * 2.0 + np.cos(x[i])
    for j in prange(2):
        leaders[j] = syscall(SYS_GETTID)


n = 1 << 21
op = numba_cpu_ffi.numba_kernel(
    work, (jax.ShapeDtypeStruct((n,), jnp.float32), jax.ShapeDtypeStruct((2,), jnp.int64))
)
x = jnp.linspace(0, 1, n, dtype=jnp.float32)
run = chained(lambda a: op(a)[0])
small = chained(lambda a: a * 0.5 + 1.0)
r = jnp.ones(1024, jnp.float32)
one, many = jnp.asarray(1, jnp.int32), jnp.asarray(12000, jnp.int32)
jax.block_until_ready(run(one, x))
times = []
for _ in range(60):
    jax.block_until_ready(small(many, r))
    start = time.perf_counter()
    jax.block_until_ready(run(one, x))
    times.append(time.perf_counter() - start)
called = jax.jit(op)
leaders = {int(np.asarray(called(x)[1])[0]) for _ in range(40)}
times = np.array(times)
median = np.median(times)
q25, q75 = np.percentile(times, [25, 75])
print(median * 1e3, (q75 - q25) / median * 100, times.max() / median, len(leaders))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="fresh processes per policy")
    args = parser.parse_args(argv)
    policies = ["default", "PASSIVE"]
    print("| wait policy | median | IQR / median | slowest / median | threads leading a team |")
    print("|---|---|---|---|---|")
    for k in range(args.processes):
        for policy in policies if k % 2 == 0 else policies[::-1]:
            env = dict(os.environ)
            env.pop("OMP_WAIT_POLICY", None)
            if policy != "default":
                env["OMP_WAIT_POLICY"] = policy
            out = subprocess.run(
                [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True
            )
            median, spread, worst, leaders = out.stdout.split()
            print(
                f"| {policy} | {float(median):.2f} ms | {float(spread):.1f} % "
                f"| {float(worst):.2f} | {leaders} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
