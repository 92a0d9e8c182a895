"""What a new numba-cuda kernel's first call costs in the launcher, on a CPU.

Run: ``uv run python tools/bench_gpu_first_call.py`` (``--processes N``,
``--kernels K``, ``--shapes``; ``--json FILE`` to keep the figures).

The launcher's CUDA path runs on the CPU as in ``tools/bench_launch_host.py``:
the kernel is compiled for sm_90 as on a GPU machine (PTX, then a cubin),
the real handler that ``ffi_core.bridge.cuda`` builds for it is registered as
a CPU FFI target, and the driver is native no-ops (the image is never
loaded, a launch only counts). In each fresh process a factory makes ``K``
kernels, each a closure over its own constant (as an operator library makes
one kernel per static parameter), and each is called once under ``jax.jit``;
the figure per new kernel is the median over kernels 2..K (the first pays
the one-time set-up: Numba's and the launcher's first compile), and the
process's first op is reported apart, from the start of the imports to its
first result. With ``--shapes`` every kernel takes another dtype, so no two
share a call shape.

Candidates: ``cold`` (numba-cuda-ffi's artifact cache and the launcher's
handler cache empty: PTX, cubin and handler compiled) and ``cached`` (both
filled by an earlier process: what a user's second run pays), each in
``--processes`` fresh processes, in alternating order. What a GPU adds is not here: loading the image into each
device's context (``cuModuleLoadData``) and the launch itself.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
DTYPES = ("float32", "float64", "int32", "int64", "int16", "uint32", "uint64", "int8", "uint8")

CHILD = """
import time
t0 = time.perf_counter()
import json, sys
sys.path.insert(0, {tools!r})
import jax, jax.numpy as jnp
import bench_launch_host as host
from numba import cuda
from numba_cuda_ffi import _primitive, numba_cuda_kernel

host._install_no_gpu()
host.lower_on_cpu(_primitive.numba_cuda_call_p, _primitive._numba_cuda_call_lowering)


def make(c):
    @cuda.jit
    def scale_add(x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] * c + y[i]

    return scale_add


times = []
first = None
for k in range({kernels}):
    dtype = {dtypes!r}[k % {n_dtypes}] if {shapes} else "float32"
    x = jnp.ones(256, dtype)
    start = time.perf_counter()
    op = numba_cuda_kernel(make(k + 1), jax.ShapeDtypeStruct(x.shape, x.dtype), launch_dims=256)
    jax.block_until_ready(jax.jit(op)(x, x))
    now = time.perf_counter()
    times.append(now - start)
    if first is None:
        first = now - t0
print(json.dumps({{"first_op_s": first, "per_kernel_s": times}}))
"""


def _run(cache: str, kernels: int, shapes: bool) -> dict:
    code = CHILD.format(
        tools=str(TOOLS), kernels=kernels, dtypes=DTYPES, n_dtypes=len(DTYPES), shapes=shapes
    )
    env_cache = {
        "NUMBA_CUDA_FFI_CACHE_DIR": cache,
        "FFI_CORE_CUDA_HANDLER_CACHE_DIR": os.path.join(cache, "handlers"),
    }
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env_cache},
        timeout=900,
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=3, help="fresh processes per candidate")
    parser.add_argument("--kernels", type=int, default=6, help="new kernels per process")
    parser.add_argument(
        "--shapes", action="store_true", help="each kernel another dtype: no shared call shape"
    )
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.kernels < 2:
        parser.error("--kernels must be at least 2 (the figure is over kernels 2..K)")
    found: dict[str, list[dict]] = {"cold": [], "cached": []}
    with tempfile.TemporaryDirectory() as root:
        for p in range(args.processes):
            order = ("cold", "cached") if p % 2 == 0 else ("cached", "cold")
            for name in order:
                cache = Path(root) / f"{name}-{p}"
                if name == "cached":
                    _run(str(cache), args.kernels, args.shapes)  # fills the cache
                found[name].append(_run(str(cache), args.kernels, args.shapes))
    what = "each kernel another dtype" if args.shapes else "one call shape"
    print(
        f"numba-cuda-ffi, new kernels' first calls under jit through the launcher on the CPU "
        f"({what}; {args.kernels} kernels a process, {args.processes} processes a candidate)"
    )
    print(
        f"{'candidate':10s} {'per new kernel, ms (median of kernels 2..K)':>46s} {'first op, s':>14s}"
    )
    for name, runs in found.items():
        per = [1e3 * statistics.median(r["per_kernel_s"][1:]) for r in runs]
        first = [r["first_op_s"] for r in runs]
        print(
            f"{name:10s} {', '.join(f'{v:.1f}' for v in per):>46s} "
            f"{', '.join(f'{v:.2f}' for v in first):>14s}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
