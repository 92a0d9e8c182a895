"""What a new kernel's first call costs, and a cached one's, on each CPU path.

Run: ``uv run python tools/bench_first_call.py`` (``--processes N``,
``--kernels K``; ``--json FILE`` to keep the figures; ``--vmap ROWS``: each
kernel's first call is a default ``jax.vmap`` over ``ROWS`` rows of 16
elements, for numba-cpu-ffi and ``jnp`` only; ``--shapes``: each kernel takes
another dtype, so no two share a call shape and numba-cpu-ffi compiles a
handler for each, for numba-cpu-ffi, ``njit`` and ``jnp`` only).

Each candidate runs in fresh processes, several times, in alternating order
(A B C ..., then ... C B A) so that machine noise falls on all alike. In each
process a factory makes ``K`` kernels, each a closure over its own constant
(as an operator library makes one kernel per static parameter), and each is
called once; the figure per new kernel is the median over kernels 2..K (the
first pays the one-time set-up), and the process's first op is reported
apart: from the start of the imports to the first result. Candidates:

- ``numba_kernel cold``: numba-cpu-ffi with an empty cache directory, under ``jax.jit``;
- ``numba_kernel cached``: the same kernels, the cache filled by an earlier process;
- ``njit cold``: numba's own ``@njit`` first call on NumPy arrays;
- ``njit cache=True``: numba's own disk cache, warm (module-level kernels: numba
  refuses to cache closures);
- ``jnp jit``: ``jax.jit`` of the comparable ``jnp`` expression;
- ``brainevent``: brainevent's ``numba_kernel`` under ``jax.jit``, where installed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

_PRELUDE = """
import time
t0 = time.perf_counter()
"""

_FACTORY = """
def make(c):
    @numba.njit
    def scale_add(x, y, out):
        for i in range(x.size):
            out[i] = c * x[i] + y[i]
    return scale_add
"""

_SCRIPTS = {
    "numba_kernel": _PRELUDE
    + """
import jax, jax.numpy as jnp, numba
from numba_cpu_ffi import numba_kernel
"""
    + _FACTORY
    + """
x = jnp.ones(1000, jnp.float32)
s = jax.ShapeDtypeStruct(x.shape, x.dtype)
def call(j):
    jax.block_until_ready(jax.jit(numba_kernel(make(0.5 + j), s))(x, x))
""",
    "njit": _PRELUDE
    + """
import numba, numpy as np
"""
    + _FACTORY
    + """
x = np.ones(1000, np.float32)
def call(j):
    make(0.5 + j)(x, x, np.empty_like(x))
""",
    "njit_cached": _PRELUDE
    + """
import numba, numpy as np, importlib, sys
sys.path.insert(0, MODULE_DIR)
kernels = importlib.import_module("first_call_kernels")
x = np.ones(1000, np.float32)
def call(j):
    getattr(kernels, f"scale_add_{j}")(x, x, np.empty_like(x))
""",
    "jnp": _PRELUDE
    + """
import jax, jax.numpy as jnp
x = jnp.ones(1000, jnp.float32)
def call(j):
    c = 0.5 + j
    jax.block_until_ready(jax.jit(lambda x, y: c * x + y)(x, x))
""",
    "brainevent": _PRELUDE
    + """
import jax, jax.numpy as jnp, numba
import brainevent
"""
    + _FACTORY
    + """
x = jnp.ones(1000, jnp.float32)
s = jax.ShapeDtypeStruct(x.shape, x.dtype)
def call(j):
    jax.block_until_ready(jax.jit(brainevent.numba_kernel(make(0.5 + j), s))(x, x))
""",
}

_TAIL = """
times = []
for j in range(KERNELS):
    start = time.perf_counter()
    call(j)
    times.append(time.perf_counter() - start)
    if j == 0:
        first_op = time.perf_counter() - t0
print(json.dumps({"first_op_s": first_op, "per_kernel_s": times}))
"""


def _vmapped(rows: int) -> dict[str, str]:
    """The numba_kernel and jnp scripts, each call a default vmap over ``rows``
    rows of 16 elements."""
    batch = f"x = jnp.ones(({rows}, 16), jnp.float32)\ns = jax.ShapeDtypeStruct((16,), x.dtype)\n"
    return {
        name: _SCRIPTS[name]
        .replace(
            "x = jnp.ones(1000, jnp.float32)\ns = jax.ShapeDtypeStruct(x.shape, x.dtype)\n", batch
        )
        .replace("x = jnp.ones(1000, jnp.float32)\n", batch)
        .replace(
            "jax.jit(numba_kernel(make(0.5 + j), s))",
            "jax.jit(jax.vmap(numba_kernel(make(0.5 + j), s)))",
        )
        .replace("jax.jit(lambda x, y: c * x + y)", "jax.jit(jax.vmap(lambda x, y: c * x + y))")
        for name in ("numba_kernel", "njit_cached", "jnp")
    }


#: The dtypes of ``--shapes``, one per kernel (Numba casts ``c * x + y`` to each).
SHAPE_DTYPES = ("float32", "int32", "int16", "int8", "uint8", "uint16", "uint32", "int64")


def _shaped() -> dict[str, str]:
    """The numba_kernel, njit and jnp scripts, kernel ``j`` called on arrays
    of ``SHAPE_DTYPES[j]``."""
    dtypes = f"DTYPES = {SHAPE_DTYPES!r}\n"
    return {
        "numba_kernel": _SCRIPTS["numba_kernel"]
        .replace(
            "x = jnp.ones(1000, jnp.float32)\ns = jax.ShapeDtypeStruct(x.shape, x.dtype)\n", dtypes
        )
        .replace(
            "    jax.block_until_ready(jax.jit(numba_kernel(make(0.5 + j), s))(x, x))",
            "    x = jnp.ones(1000, DTYPES[j])\n"
            "    s = jax.ShapeDtypeStruct(x.shape, x.dtype)\n"
            "    jax.block_until_ready(jax.jit(numba_kernel(make(0.5 + j), s))(x, x))",
        ),
        "njit": _SCRIPTS["njit"]
        .replace("x = np.ones(1000, np.float32)\n", dtypes)
        .replace(
            "    make(0.5 + j)(x, x, np.empty_like(x))",
            "    x = np.ones(1000, DTYPES[j])\n    make(0.5 + j)(x, x, np.empty_like(x))",
        ),
        "jnp": _SCRIPTS["jnp"]
        .replace("x = jnp.ones(1000, jnp.float32)\n", dtypes)
        .replace("    c = 0.5 + j\n", "    c = 0.5 + j\n    x = jnp.ones(1000, DTYPES[j])\n"),
    }


def _module_source(kernels: int) -> str:
    body = ["import numba", ""]
    for j in range(kernels):
        body += [
            "@numba.njit(cache=True)",
            f"def scale_add_{j}(x, y, out):",
            "    for i in range(x.size):",
            f"        out[i] = {0.5 + j!r} * x[i] + y[i]",
            "",
        ]
    return "\n".join(body)


def _run(script: str, env: dict[str, str], kernels: int, module_dir: str) -> dict:
    source = (
        "import json\n"
        + script.replace("MODULE_DIR", repr(module_dir))
        + _TAIL.replace("KERNELS", str(kernels))
    )
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _available(module: str) -> bool:
    return (
        subprocess.run(
            [sys.executable, "-c", f"import {module}"], capture_output=True, check=False
        ).returncode
        == 0
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=3, help="fresh processes per candidate")
    parser.add_argument("--kernels", type=int, default=7, help="new kernels per process")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--vmap", type=int, metavar="ROWS", help="first calls under jax.vmap of ROWS rows"
    )
    parser.add_argument(
        "--shapes", action="store_true", help="each kernel another dtype: no call shape shared"
    )
    args = parser.parse_args()
    if args.shapes and args.vmap is not None:
        parser.error("--shapes and --vmap measure different things: give one")
    if args.shapes and args.kernels > len(SHAPE_DTYPES):
        parser.error(f"--shapes has {len(SHAPE_DTYPES)} dtypes: --kernels at most that")

    candidates = ["numba_kernel cold", "numba_kernel cached"]
    if args.vmap is None:
        candidates.append("njit cold")
    if args.vmap is None and not args.shapes:
        candidates.append("njit cache=True")
    candidates.append("jnp jit")
    if _available("brainevent") and args.vmap is None and not args.shapes:
        candidates.append("brainevent")
    if args.shapes:
        scripts = _shaped()
    else:
        scripts = _SCRIPTS if args.vmap is None else _vmapped(args.vmap)
    results: dict[str, list[dict]] = {c: [] for c in candidates}
    with tempfile.TemporaryDirectory() as work:
        module_dir = Path(work) / "module"
        module_dir.mkdir()
        (module_dir / "first_call_kernels.py").write_text(_module_source(args.kernels))
        base = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CACHE_DIR")}
        warm_cache = Path(work) / "warm"
        numba_cache = Path(work) / "numba-cache"
        # Fill the caches the warm candidates read.
        _run(
            scripts["numba_kernel"],
            {**base, "NUMBA_CPU_FFI_CACHE_DIR": str(warm_cache)},
            args.kernels,
            str(module_dir),
        )
        if "njit cache=True" in candidates:
            _run(
                scripts["njit_cached"],
                {**base, "NUMBA_CACHE_DIR": str(numba_cache)},
                args.kernels,
                str(module_dir),
            )
        for p in range(args.processes):
            order = candidates if p % 2 == 0 else candidates[::-1]
            for name in order:
                if name == "numba_kernel cold":
                    cold = tempfile.mkdtemp(dir=work)
                    env = {**base, "NUMBA_CPU_FFI_CACHE_DIR": cold}
                    script = scripts["numba_kernel"]
                elif name == "numba_kernel cached":
                    env = {**base, "NUMBA_CPU_FFI_CACHE_DIR": str(warm_cache)}
                    script = scripts["numba_kernel"]
                elif name == "njit cold":
                    env, script = base, scripts["njit"]
                elif name == "njit cache=True":
                    env = {**base, "NUMBA_CACHE_DIR": str(numba_cache)}
                    script = scripts["njit_cached"]
                elif name == "jnp jit":
                    env, script = base, scripts["jnp"]
                else:
                    env, script = base, scripts["brainevent"]
                results[name].append(_run(script, env, args.kernels, str(module_dir)))

    summary = {}
    print(f"{'candidate':<22} {'per new kernel (ms)':>20} {'range':>14} {'first op (s)':>13}")
    for name, runs in results.items():
        per_process = [statistics.median(r["per_kernel_s"][1:]) * 1e3 for r in runs]
        first = [r["first_op_s"] for r in runs]
        summary[name] = {
            "per_kernel_ms": statistics.median(per_process),
            "per_kernel_ms_range": [min(per_process), max(per_process)],
            "first_op_s": statistics.median(first),
            "first_op_s_range": [min(first), max(first)],
        }
        lo, hi = summary[name]["per_kernel_ms_range"]
        print(
            f"{name:<22} {summary[name]['per_kernel_ms']:>20.1f} {f'{lo:.0f}-{hi:.0f}':>14} "
            f"{summary[name]['first_op_s']:>13.2f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
