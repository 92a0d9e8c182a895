"""Benchmarks of xla-custom-kernel on this machine.

Run: ``uv run python tools/bench_xla_custom_kernel.py`` (``--quick`` for a short run).

1. Dispatch cost: a numba kernel called through ``XLACustomKernel`` against the
   same kernel called with ``numba_kernel`` directly, inside one ``jit``, as one
   call and as 1,000 chained calls. The lowered programs are also compared:
   whether both hold the same FFI custom call is printed.
2. Batching: ``vmap`` of the CSR matrix-vector product over 32 vectors (one
   native call for the batch) against one call per vector in a ``lax.scan``.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys

import jax
import jax.numpy as jnp
import numba
import numpy as np
from bench_numba_cpu import interleaved
from jax import lax
from kernel_bench.examples import csr_matvec, random_csr
from numba_cpu_ffi import numba_kernel
from xla_custom_kernel import XLACustomKernel


@numba.njit
def scale_add(x, y, out):
    for i in range(x.size):
        out[i] = 0.5 * x[i] + y[i]


op = XLACustomKernel("bench_scale_add")
op.def_numba_kernel(lambda outs: scale_add)


def via_op(x, y):
    return op(x, y, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))


def via_numba_kernel(x, y):
    return numba_kernel(scale_add, jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def chain(f, n):
    def run(x, y):
        return lax.fori_loop(0, n, lambda i, acc: f(acc, y), x)

    return run


def custom_calls(fn, *args) -> list[str]:
    """The custom-call lines of ``fn``'s lowered program, with the digest in the
    target name removed: the two paths' digests differ only because the op's
    handler also names the operation in its error messages."""
    text = jax.jit(fn).lower(*args).as_text()
    lines = [line.strip() for line in text.splitlines() if "stablehlo.custom_call" in line]
    return [re.sub(r"(@numba_cpu\.\w+)_[0-9a-f]{16,}(?=\()", r"\1", line) for line in lines]


def dispatch_cost(rounds: int) -> dict:
    out = {}
    for label, n in (("tiny", 16), ("large", 1 << 20)):
        x = jnp.arange(n, dtype=jnp.float32)
        y = jnp.ones(n, jnp.float32)
        targets = {
            name: custom_calls(f, x, y)
            for name, f in (("op", via_op), ("direct", via_numba_kernel))
        }
        assert len(targets["op"]) == 1 and len(targets["direct"]) == 1, targets
        cands = {
            "op": functools.partial(jax.jit(via_op), x, y),
            "direct": functools.partial(jax.jit(via_numba_kernel), x, y),
        }
        res = interleaved(cands, rounds, 50 if n < 1000 else 5)
        res["same_custom_call"] = targets["op"] == targets["direct"]
        out[f"one_call_{label}"] = res
    x = jnp.arange(16, dtype=jnp.float32)
    y = jnp.ones(16, jnp.float32)
    a, b = jax.jit(chain(via_op, 1000)), jax.jit(chain(via_numba_kernel, 1000))
    res = interleaved({"op": lambda: a(x, y), "direct": lambda: b(x, y)}, rounds, 3)
    res["op_us_per_call"] = res["op_us"] / 1000
    res["direct_us_per_call"] = res["direct_us"] / 1000
    out["chain_1000_tiny"] = res
    return out


def vmap_vs_scan(rounds: int, n: int = 20_000, p: float = 0.005, batch: int = 32) -> dict:
    data, indices, indptr = random_csr(n, n, p, seed=0)
    vs = np.random.default_rng(1).standard_normal((batch, n)).astype(np.float32)

    def one(v):
        return csr_matvec.call(data, indices, indptr, v, shape=(n, n), backend="numba")

    vmapped = jax.jit(jax.vmap(one))
    scanned = jax.jit(lambda vs: lax.scan(lambda c, v: (c, one(v)), None, vs)[1])
    np.testing.assert_allclose(vmapped(vs), scanned(vs), rtol=1e-5, atol=1e-4)
    res = interleaved({"scan": lambda: scanned(vs), "vmap": lambda: vmapped(vs)}, rounds, 3)
    res.update(n=n, p=p, nnz=int(data.size), batch=batch)
    return res


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    rounds = 5 if args.quick else 21
    results = {"dispatch": dispatch_cost(rounds), "csr_matvec_vmap32": vmap_vs_scan(rounds)}
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    d = results["dispatch"]
    for key in ("one_call_tiny", "one_call_large"):
        r = d[key]
        print(
            f"{key:>16}: XLACustomKernel {r['op_us']:9.2f} us, numba_kernel {r['direct_us']:9.2f} us, "
            f"ratio {r['ratio_op_over_direct']:.3f} (same custom call: {r['same_custom_call']})"
        )
    c = d["chain_1000_tiny"]
    print(
        f"{'chain 1000 tiny':>16}: XLACustomKernel {c['op_us_per_call']:.3f} us/call, "
        f"numba_kernel {c['direct_us_per_call']:.3f} us/call, ratio {c['ratio_op_over_direct']:.3f}"
    )
    v = results["csr_matvec_vmap32"]
    print(
        f"{'csr vmap 32':>16}: lax.scan {v['scan_us'] / 1e3:.2f} ms, vmap {v['vmap_us'] / 1e3:.2f} ms, "
        f"speedup {v['ratio_scan_over_vmap']:.1f}x (n={v['n']}, nnz={v['nnz']})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
