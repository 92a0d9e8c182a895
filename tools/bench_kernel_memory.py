"""Resident memory per distinct numba-cpu-ffi kernel, after its first call.

Run: ``uv run python tools/bench_kernel_memory.py`` (``--n 50`` kernels,
``--repeats 3`` fresh processes per row, ``--rows cold,warm,...`` the rows to run,
``--json`` for machine-readable output).

Each row runs in fresh processes. A process builds one kernel and calls it
(warm-up: Numba, LLVM and XLA start), reads its resident set size
(``/proc/self/statm``, after ``gc.collect`` and ``malloc_trim``), then builds
and calls N distinct kernels (closures over different constants, so each has
its own digest, handler and XLA executable) and reads it again: the growth
divided by N is the memory per kernel. Rows:

- ``cold``: ``numba_kernel`` ops jitted and called, the handler cache in an
  empty directory (every handler compiled);
- ``warm``: the same, the handler cache filled by the ``cold`` process before
  it (handlers loaded from disk);
- ``vmap``: as ``cold``, each op called under ``jax.vmap`` (the handler with
  its batch loop);
- ``handler``: the handlers compiled (``compiled_handler``), no XLA;
- ``njit``: the kernels alone compiled by Numba for their signature;
- ``jnp``: as many distinct ``jax.jit`` functions of ``jnp`` ops (XLA's own
  cost per executable, for comparison).
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROWS = ("cold", "warm", "vmap", "handler", "njit", "jnp")


def _rss_bytes() -> int:
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _child(row: str, n: int) -> dict[str, float]:
    """Runs in the fresh process: the memory of ``n`` kernels of ``row``."""
    import jax
    import jax.numpy as jnp
    import numba
    import numpy as np
    from numba_cpu_ffi import numba_kernel

    x = jnp.arange(16, dtype=jnp.float32)
    rows = jnp.stack([x, x])
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)

    def make(c: float):
        @numba.njit
        def scale(x, out):
            for i in range(x.size):
                out[i] = x[i] * c + 1.0

        return scale

    def build(c: float):
        if row == "jnp":
            jax.jit(lambda x: x * c + 1.0)(x).block_until_ready()
            return
        kernel = make(c)
        if row == "njit":
            kernel.compile("(float32[::1], float32[::1])")
            return
        if row == "handler":
            from ffi_core.bridge import array_sig
            from numba_cpu_ffi._catalog import kernel_info
            from numba_cpu_ffi._codegen import compiled_handler
            from numba_cpu_ffi._spec import CallSig

            arrays = (array_sig(jax.core.ShapedArray((16,), np.float32)),)
            compiled_handler(kernel_info(kernel), CallSig(arrays, arrays, None, "", False))
            return
        op = numba_kernel(kernel, out)
        if row == "vmap":
            jax.jit(jax.vmap(op))(rows).block_until_ready()
            return
        jax.jit(op)(x).block_until_ready()

    build(-1.0)  # warm-up
    before = _rss_bytes()
    for i in range(n):
        build(float(i) + 0.5)
    after = _rss_bytes()
    return {
        "before_mib": before / 2**20,
        "after_mib": after / 2**20,
        "per_kernel_mib": (after - before) / n / 2**20,
    }


def _run(row: str, n: int, cache: str) -> dict[str, float]:
    env = {**os.environ, "NUMBA_CPU_FFI_CACHE_DIR": cache, "JAX_PLATFORMS": "cpu"}
    command = [sys.executable, __file__, "--child", row, "--n", str(n)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"row {row!r} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=50, help="distinct kernels per process")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per row")
    parser.add_argument("--rows", default=",".join(ROWS), help=f"among {', '.join(ROWS)}")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--child", choices=ROWS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.n)))
        return
    asked = [r for r in args.rows.split(",") if r]
    unknown = [r for r in asked if r not in ROWS]
    if unknown:
        parser.error(f"--rows takes {', '.join(ROWS)}, got {', '.join(unknown)}")
    rows = [r for r in ROWS if r in asked]  # "cold" before "warm", which reuses its cache
    runs: dict[str, list[dict[str, float]]] = {row: [] for row in rows}
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="bench-kernel-memory-") as scratch:
            for row in rows:
                # Each row its own empty handler cache, but "warm": the one
                # "cold" filled (filled here when "cold" is not a row).
                cache = os.path.join(scratch, "cold" if row == "warm" else row)
                if row == "warm" and "cold" not in rows:
                    _run("cold", args.n, cache)
                runs[row].append(_run("cold" if row == "warm" else row, args.n, cache))
    results: dict[str, dict[str, object]] = {}
    for row in rows:
        per = [r["per_kernel_mib"] for r in runs[row]]
        results[row] = {
            "per_kernel_mib": per,
            "median_mib": statistics.median(per),
            "baseline_mib": statistics.median(r["before_mib"] for r in runs[row]),
        }
    if args.json:
        print(json.dumps({"n": args.n, "repeats": args.repeats, "rows": results}))
        return
    print(f"{args.n} distinct kernels per fresh process, {args.repeats} processes per row")
    print(f"{'row':<8} {'MiB/kernel':>10}  {'each process':<24} {'RSS before (MiB)':>16}")
    for row, r in results.items():
        each = ", ".join(f"{v:.2f}" for v in r["per_kernel_mib"])
        print(f"{row:<8} {r['median_mib']:>10.2f}  {each:<24} {r['baseline_mib']:>16.0f}")


if __name__ == "__main__":
    main()
