"""Benchmarks of warp-ffi on the CPU against XLA's own ops, numba-cpu-ffi, a
``jax.pure_callback`` and Warp's own ``wp.launch``.

Run: ``uv run python tools/bench_warp_cpu.py`` (``--quick`` for a short run,
``--rounds N`` for N timed rounds of every group).

Each comparison runs its candidates in interleaved rounds (A, B, A, B, ...) so
that machine noise hits both alike, and reports the median time of each and the
median of the per-round ratios. Groups:

- ``tiny``: one add of 16 float32 under jit, against ``jnp.add``;
- ``chain``: 1,000 chained tiny adds in one jit, against the same chain of
  ``numba_kernel`` calls and of a no-op native handler (XLA's own cost of a
  custom call); per call, less the cost of an empty jit call;
- ``callback``: 100 chained tiny adds in one jit, against ``jax.pure_callback``
  calling ``wp.launch`` on Warp arrays made from the NumPy inputs (the design
  that runs Python at every call);
- ``add_2pow20``: an add of 2^20 float32, against ``jnp.add`` and against
  ``wp.launch`` from Python on preallocated Warp arrays (Warp's own kernel time);
- ``vmap``: the default vmap of a row kernel over 64 rows of 1,000, against one
  call on the 64,000 elements;
- ``jax_kernel``: warp-ffi against Warp's own ``warp.jax_kernel`` (a Python
  callback per call): 100 chained tiny adds in one jit, an add of 2^20
  float32, the default vmap over 64 rows of 1,000, and ``jax.grad`` of the
  sum of a tiny add (``enable_backward=True``);
- ``first_call``: the first result in a fresh process, with empty caches (Warp's
  kernel cache and warp-ffi's handler cache) and then with the caches the first
  process left; and a second new kernel of the same layout in each process.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
from collections.abc import Callable

import ffi_core
import ffi_core.bridge
import jax
import jax.numpy as jnp
import numba
import numpy as np
import warp as wp
import warp_ffi
from bench_numba_cpu import faults_per_call, interleaved
from ffi_core.abi import native as N
from numba_cpu_ffi import numba_kernel
from warp_ffi import warp_kernel

# A tool is an application: no banner and no "Module ... load" lines from Warp.
wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def add(
    x: wp.array(dtype=wp.float32),
    y: wp.array(dtype=wp.float32),
    out: wp.array(dtype=wp.float32),
):
    i = wp.tid()
    out[i] = x[i] + y[i]


@numba.njit
def add_numba(x, y, out):
    for i in range(x.size):
        out[i] = x[i] + y[i]


def _struct(x: jax.Array) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def bench_tiny(rounds: int) -> dict:
    x = jnp.arange(16, dtype=jnp.float32)
    f = jax.jit(warp_kernel(add, _struct(x)))
    g = jax.jit(jnp.add)
    return interleaved({"warp": lambda: f(x, x), "jnp": lambda: g(x, x)}, rounds, 2000)


def _chain(op: Callable[..., jax.Array], n: int) -> Callable[[jax.Array], jax.Array]:
    @jax.jit
    def chain(x):
        for _ in range(n):
            x = op(x, x)
        return x

    return chain


@numba.cfunc(numba.types.uintp(numba.types.uintp))
def _noop_handler(frame):
    # The least a native FFI handler does: answer the metadata query, return.
    if N.is_metadata_query(frame):
        return N.answer_metadata(frame, 0)
    return 0


def _noop_op() -> Callable[..., jax.Array]:
    name = ffi_core.bridge.target_name("bench_warp_cpu.noop", "v1")
    ffi_core.bridge.register_target(name, _noop_handler, content="v1")
    # The same buffers as the add (two inputs, one output); it writes nothing.
    return jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((16,), jnp.float32))


def bench_chain(rounds: int, n: int = 1000) -> dict:
    # Per call, less the cost of an empty jit call: warp-ffi's add, numba-cpu-ffi's
    # add, and a no-op native handler (what XLA's custom-call dispatch costs).
    x = jnp.arange(16, dtype=jnp.float32)
    chain_warp = _chain(warp_kernel(add, _struct(x)), n)
    chain_numba = _chain(numba_kernel(add_numba, _struct(x)), n)
    noop = _noop_op()
    chain_noop = _chain(noop, n)
    empty = jax.jit(lambda x: x)
    res = interleaved(
        {
            "warp_chain": lambda: chain_warp(x),
            "numba_chain": lambda: chain_numba(x),
            "noop_chain": lambda: chain_noop(x),
            "empty": lambda: empty(x),
        },
        rounds,
        20,
    )
    for name in ("warp", "numba", "noop"):
        res[f"{name}_per_call_us"] = (res[f"{name}_chain_us"] - res["empty_us"]) / n
    res["ratio_per_call_warp_over_noop"] = res["warp_per_call_us"] / res["noop_per_call_us"]
    res["ratio_per_call_warp_over_numba"] = res["warp_per_call_us"] / res["numba_per_call_us"]
    return res


def _launch_on_host(x: jax.Array, y: jax.Array) -> np.ndarray:
    # What a pure_callback bridge does at every call: Python, Warp arrays
    # around the host buffers, a launch from Python.
    x, y = np.asarray(x), np.asarray(y)
    out = np.empty_like(x)
    wp.launch(
        add,
        dim=x.shape[0],
        inputs=[wp.array(x, device="cpu", copy=False), wp.array(y, device="cpu", copy=False)],
        outputs=[wp.array(out, device="cpu", copy=False)],
        device="cpu",
    )
    return out


def bench_callback(rounds: int, n: int = 100) -> dict:
    x = jnp.arange(16, dtype=jnp.float32)
    chain_warp = _chain(warp_kernel(add, _struct(x)), n)
    chain_callback = _chain(lambda a, b: jax.pure_callback(_launch_on_host, _struct(a), a, b), n)
    empty = jax.jit(lambda x: x)
    res = interleaved(
        {
            "callback_chain": lambda: chain_callback(x),
            "warp_chain": lambda: chain_warp(x),
            "empty": lambda: empty(x),
        },
        rounds,
        5,
    )
    res["callback_per_call_us"] = (res["callback_chain_us"] - res["empty_us"]) / n
    res["warp_per_call_us"] = (res["warp_chain_us"] - res["empty_us"]) / n
    res["speedup_warp_over_callback"] = res["callback_per_call_us"] / res["warp_per_call_us"]
    return res


def bench_large(rounds: int) -> dict:
    x = jnp.asarray(np.random.default_rng(0).random(2**20, dtype=np.float32))
    y = x + 1
    f = jax.jit(warp_kernel(add, _struct(x)))
    g = jax.jit(jnp.add)
    # Warp alone: its kernel on arrays allocated once, launched from Python
    # (a CPU launch returns when the kernel is done).
    wx, wy = wp.array(np.asarray(x), device="cpu"), wp.array(np.asarray(y), device="cpu")
    wout = wp.empty(x.shape, dtype=wp.float32, device="cpu")

    def launch() -> None:
        wp.launch(add, dim=x.shape[0], inputs=[wx, wy], outputs=[wout], device="cpu")

    cands = {"warp": lambda: f(x, y), "jnp": lambda: g(x, y), "wp_launch": launch}
    res = interleaved(cands, rounds, 20)
    np.testing.assert_array_equal(np.asarray(f(x, y)), wout.numpy())
    for k, fn in cands.items():
        res[f"{k}_page_faults_per_call"] = faults_per_call(fn)
    return res


def bench_vmap(rounds: int, rows: int, cols: int) -> dict:
    x = jnp.asarray(np.random.default_rng(0).random((rows, cols), dtype=np.float32))
    row = jax.ShapeDtypeStruct((cols,), jnp.float32)
    flat = jax.ShapeDtypeStruct((rows * cols,), jnp.float32)
    fv = jax.jit(jax.vmap(warp_kernel(add, row)))
    ff = jax.jit(warp_kernel(add, flat))
    xf = x.reshape(-1)
    inner = max(10, 2_000_000 // (rows * cols))
    return interleaved({"vmap": lambda: fv(x, x), "flat": lambda: ff(xf, xf)}, rounds, inner)


_FIRST_CALL_KERNELS = """
import warp as wp

@wp.kernel
def scale_add(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32),
              out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = 2.0 * x[i] + y[i]

@wp.kernel
def sub(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32),
        out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = x[i] - y[i]
"""

_FIRST_CALL = """
import time
t0 = time.perf_counter()
import jax, jax.numpy as jnp, warp as wp
wp.config.log_level = wp.LOG_WARNING
from warp_ffi import warp_kernel
import first_call_kernels as k
x = jnp.ones(8, jnp.float32)
t1 = time.perf_counter()
jax.block_until_ready(jax.jit(warp_kernel(k.scale_add, jax.ShapeDtypeStruct(x.shape, x.dtype)))(x, x))
t2 = time.perf_counter()
jax.block_until_ready(jax.jit(warp_kernel(k.sub, jax.ShapeDtypeStruct(x.shape, x.dtype)))(x, x))
print(t1 - t0, t2 - t1, time.perf_counter() - t2)
"""


def bench_jax_kernel(rounds: int) -> dict:
    """warp-ffi against ``warp.jax_kernel`` on the same kernel."""
    # warp.jax_kernel reads the kernel's annotations as objects, which this
    # module's ``from __future__ import annotations`` makes strings.
    from _warp_plain_kernels import add as plain_add

    theirs = wp.jax_kernel(plain_add, enable_backward=True)
    tiny = jnp.arange(16, dtype=jnp.float32)
    big = jnp.asarray(np.random.default_rng(0).random(2**20, dtype=np.float32))
    rows = jnp.asarray(np.random.default_rng(1).random((64, 1000), dtype=np.float32))

    def ours_for(x: jax.Array) -> Callable[..., jax.Array]:
        return warp_kernel(add, _struct(x))

    def theirs_one(x: jax.Array, y: jax.Array) -> jax.Array:
        return theirs(x, y)[0]

    cases: dict[str, tuple[Callable[..., object], Callable[..., object], tuple, int]] = {
        "chain_100_tiny": (
            jax.jit(_chain(ours_for(tiny), 100)),
            jax.jit(_chain(theirs_one, 100)),
            (tiny,),
            50,
        ),
        "add_2pow20": (jax.jit(ours_for(big)), jax.jit(theirs_one), (big, big), 20),
        "vmap_64x1000": (
            jax.jit(jax.vmap(ours_for(rows[0]))),
            jax.jit(jax.vmap(theirs_one)),
            (rows, rows),
            50,
        ),
        "grad_tiny": (
            jax.jit(jax.grad(lambda x, y: jnp.sum(ours_for(tiny)(x, y)))),
            jax.jit(jax.grad(lambda x, y: jnp.sum(theirs_one(x, y)))),
            (tiny, tiny),
            200,
        ),
    }
    res = {}
    for label, (ours, warps, args, inner) in cases.items():
        np.testing.assert_allclose(ours(*args), warps(*args), rtol=1e-6)
        r = interleaved(
            {"warp_ffi": lambda f=ours, a=args: f(*a), "jax_kernel": lambda f=warps, a=args: f(*a)},
            rounds,
            inner,
        )
        res |= {f"{label}_{k}": v for k, v in r.items()}
    return res


def bench_first_call() -> dict:
    with tempfile.TemporaryDirectory() as folder:
        # Warp's kernel cache and warp-ffi's handler cache of this measurement
        # alone, and the kernels' module.
        env = {
            **os.environ,
            "WARP_CACHE_PATH": folder,
            "WARP_FFI_HANDLER_CACHE_DIR": os.path.join(folder, "handlers"),
            "PYTHONPATH": folder,
        }
        pathlib.Path(folder, "first_call_kernels.py").write_text(_FIRST_CALL_KERNELS)
        runs = []
        for _ in range(2):
            out = subprocess.run(
                [sys.executable, "-c", _FIRST_CALL],
                env=env,
                cwd=folder,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()
            runs.append((float(out[-2]), float(out[-1])))
    # The first op of a process, and a second kernel of the same layout after it.
    return {
        "first_call_cold_cache_s": runs[0][0],
        "first_call_warm_cache_s": runs[1][0],
        "new_kernel_cold_cache_s": runs[0][1],
        "new_kernel_warm_cache_s": runs[1][1],
    }


def _table(results: dict[str, dict]) -> str:
    rows = [(group, k, v) for group, res in results.items() for k, v in res.items()]
    widths = [max(len(r[i]) for r in rows) for i in (0, 1)]
    lines = []
    for group, key, value in rows:
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        lines.append(f"{group:{widths[0]}s}  {key:{widths[1]}s}  {text}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument(
        "--rounds",
        type=int,
        help="timed rounds of every group, chain and callback included (default: 21, "
        "5 with --quick, and a third of that, at least 3, for chain and callback)",
    )
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--reverse", action="store_true", help="run the groups in reverse order")
    parser.add_argument("--only", nargs="+", metavar="GROUP", help="run only these groups")
    args = parser.parse_args()
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")
    rounds = args.rounds or (5 if args.quick else 21)
    few = args.rounds or max(3, rounds // 3)
    groups: dict[str, Callable[[], dict]] = {
        "tiny": lambda: bench_tiny(rounds),
        "chain": lambda: bench_chain(few),
        "callback": lambda: bench_callback(few),
        "add_2pow20": lambda: bench_large(rounds),
        "vmap": lambda: bench_vmap(rounds, 64, 1000),
        "jax_kernel": lambda: bench_jax_kernel(rounds),
        "first_call": bench_first_call,
    }
    unknown = set(args.only or ()) - set(groups)
    if unknown:
        parser.error(f"--only: unknown groups {sorted(unknown)}; known: {', '.join(groups)}")
    order = [g for g in groups if not args.only or g in args.only]
    order = order[::-1] if args.reverse else order
    results = {name: groups[name]() for name in order}
    results["machine"] = {
        "cpus": os.cpu_count(),
        "jax": jax.__version__,
        "warp": wp.config.version,
        "warp_ffi": warp_ffi.__version__,
        "numba": numba.__version__,
    }
    print(_table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
