"""A real operator library on two bridges: brainevent's own, and ours.

brainevent (PyPI) builds its sparse and event-driven operators on the seed API
that xla-custom-kernel and numba-cpu-ffi mirror. This script loads brainevent
twice in one process: once as it ships, once with its bridge
(``XLACustomKernel``, ``numba_kernel``, ``general_batching_rule``) replaced by
ours before its operator modules import. It then times the same operators,
on the same arrays, through both, on the CPU, in interleaved rounds (A, B, A,
B, ...), and prints the median of each and the median of the per-round ratios.

brainevent is not a dependency of this project; run the script in a scratch
environment (brainevent 0.3.0 needs Python 3.12 or newer):

    uv venv --python 3.12 /tmp/be/.venv
    uv pip install --python /tmp/be/.venv brainevent==0.3.0 \\
        -e "packages/ffi-core[native]" -e packages/numba-cpu-ffi \\
        -e "packages/xla-custom-kernel[numba]"
    /tmp/be/.venv/bin/python tools/bench_brainevent.py          # --quick: fewer rounds

Operators: a CSR binary-event matvec (n = 10^4 and 10^5, 100 connections per
row, 1 % of events active), a dense binary-event matmul, and a
just-in-time-connectivity (scalar weight) binary matvec; each at a tiny size,
where the per-call cost dominates, and at a realistic one.

``--first-call`` times what a test suite or a notebook pays instead: each
bridge in fresh processes (alternating, ``--processes`` each; ours with an
empty cache directory), every operator's first call (compile included), in
the order above, and the process's whole run from its first import.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import statistics
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any


def _load_brainevent(ours: bool) -> ModuleType:
    """A fresh copy of brainevent; with ``ours``, on our bridge."""
    for name in [m for m in sys.modules if m == "brainevent" or m.startswith("brainevent.")]:
        del sys.modules[name]
    finder = _SwapFinder() if ours else None
    if finder is not None:
        sys.meta_path.insert(0, finder)
    try:
        import brainevent
    finally:
        if finder is not None:
            sys.meta_path.remove(finder)
    return brainevent


class _SwapLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader) -> None:
        self.inner = inner

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        # brainevent._op has run; no operator module has imported it yet.
        import numba_cpu_ffi
        import xla_custom_kernel

        module.XLACustomKernel = xla_custom_kernel.XLACustomKernel
        module.general_batching_rule = xla_custom_kernel.general_batching_rule
        module.numba_kernel = numba_cpu_ffi.numba_kernel


class _SwapFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "brainevent._op":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = _SwapLoader(spec.loader)
        return spec


def _cases(be: ModuleType, quick: bool) -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """``{label: (jitted function, arguments)}`` for one copy of brainevent."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from brainevent._csr.binary import _make_binary_csrmv_workspace

    rng = np.random.default_rng(0)
    cases = {}
    for n in (100, 10_000) if quick else (100, 10_000, 100_000):
        n_conn = min(100, n)
        indptr = jnp.asarray(np.arange(n + 1, dtype=np.int32) * n_conn)
        indices = jnp.asarray(rng.integers(0, n, n * n_conn, dtype=np.int32))
        data = jnp.asarray(rng.random(n * n_conn, dtype=np.float32))
        spikes = jnp.asarray(rng.random(n) < 0.01)
        workspace = _make_binary_csrmv_workspace(indptr)
        f = jax.jit(
            lambda d, i, p, v, w, n=n: be.binary_csrmv(d, i, p, v, shape=(n, n), workspace=w)
        )
        cases[f"csr binary matvec n={n}"] = (f, (data, indices, indptr, spikes, workspace))
    for m, k, b in ((8, 8, 4), (1000, 1000, 64)):
        weights = jnp.asarray(rng.random((m, k), dtype=np.float32))
        spikes = jnp.asarray(rng.random((k, b)) < 0.05)
        f = jax.jit(lambda w, s: be.binary_densemm(w, s, transpose=False))
        cases[f"dense binary matmul {m}x{k}@{k}x{b}"] = (f, (weights, spikes))
    for n in (100, 10_000):
        spikes = jnp.asarray(rng.random(n) < 0.01)
        f = jax.jit(
            lambda v, n=n: be.binary_jitsmv(jnp.float32(0.5), 0.01, v, seed=123, shape=(n, n))
        )
        cases[f"jit-connectivity binary matvec n={n}"] = (f, (spikes,))
    return cases


def _time(f: Callable[..., Any], args: tuple[Any, ...], calls: int) -> float:
    import jax

    start = time.perf_counter()
    for _ in range(calls):
        out = f(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / calls


def _first_calls(ours: bool) -> None:
    """In a fresh process: each operator's first call, as JSON on stdout."""
    import json

    start = time.perf_counter()
    import jax

    cases = _cases(_load_brainevent(ours=ours), quick=True)
    firsts = {}
    for label, (f, args) in cases.items():
        t = time.perf_counter()
        jax.block_until_ready(f(*args))
        firsts[label] = time.perf_counter() - t
    print(json.dumps({"firsts": firsts, "process_s": time.perf_counter() - start}))


def first_call_main(processes: int) -> None:
    import json
    import os
    import subprocess
    import tempfile

    runs: dict[str, list[dict[str, Any]]] = {"brainevent": [], "ours": []}
    with tempfile.TemporaryDirectory() as work:
        for p in range(processes):
            order = ["brainevent", "ours"] if p % 2 == 0 else ["ours", "brainevent"]
            for bridge in order:
                env = {**os.environ, "NUMBA_CPU_FFI_CACHE_DIR": tempfile.mkdtemp(dir=work)}
                flag = "--child-ours" if bridge == "ours" else "--child-theirs"
                out = subprocess.run(
                    [sys.executable, __file__, flag],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                runs[bridge].append(json.loads(out.strip().splitlines()[-1]))
    labels = list(runs["ours"][0]["firsts"])
    print(f"first call per operator, median of {processes} fresh processes each")
    print(f"{'operator':42} {'brainevent':>12} {'ours':>12} {'ours/theirs':>12}")
    for label in [*labels, "whole process"]:

        def pick(r: dict[str, Any], label: str = label) -> float:
            return r["process_s"] if label == "whole process" else r["firsts"][label]

        a = statistics.median(pick(r) for r in runs["brainevent"])
        b = statistics.median(pick(r) for r in runs["ours"])
        print(f"{label:42} {_fmt(a):>12} {_fmt(b):>12} {b / a:>11.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and sizes")
    parser.add_argument("--first-call", action="store_true", help="time first calls instead")
    parser.add_argument("--processes", type=int, default=3, help="with --first-call")
    parser.add_argument("--child-ours", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-theirs", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child_ours or options.child_theirs:
        _first_calls(ours=options.child_ours)
        return
    if options.first_call:
        first_call_main(options.processes)
        return
    import jax
    import numpy as np

    theirs = _cases(_load_brainevent(ours=False), options.quick)
    ours = _cases(_load_brainevent(ours=True), options.quick)
    rounds = 5 if options.quick else 15
    print(f"jax {jax.__version__}, {rounds} interleaved rounds, median time per call")
    print(f"{'operator':42} {'brainevent':>12} {'ours':>12} {'ours/theirs':>12}")
    for label, (f_theirs, args) in theirs.items():
        f_ours = ours[label][0]
        a, b = f_theirs(*args), f_ours(*args)  # compile both, and compare
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
        t0 = _time(f_theirs, args, 3)
        calls = max(1, min(2000, int(0.05 / max(t0, 1e-7))))
        ta, tb = [], []
        for _ in range(rounds):
            ta.append(_time(f_theirs, args, calls))
            tb.append(_time(f_ours, args, calls))
        ratio = statistics.median(y / x for x, y in zip(ta, tb, strict=True))
        print(
            f"{label:42} {_fmt(statistics.median(ta)):>12} {_fmt(statistics.median(tb)):>12} "
            f"{ratio:>11.2f}x"
        )


def _fmt(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


if __name__ == "__main__":
    main()
