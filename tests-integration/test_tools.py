"""The benchmark scripts in tools/ that reach into private internals still run
(a short run: the figures themselves come from full runs, never from tests)."""

import pathlib
import subprocess
import sys

TOOLS = pathlib.Path(__file__).resolve().parents[1] / "tools"


def test_bench_numba_cuda_handler_runs():
    out = subprocess.run(
        [
            sys.executable,
            str(TOOLS / "bench_numba_cuda_handler.py"),
            "--calls",
            "20",
            "--repeats",
            "1",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    lines = out.splitlines()
    assert lines[0] == "20 chained calls in one jit, best of 1, per call:"
    assert [line.split("  ")[1].strip() for line in lines[1:]] == [
        "numba-cuda-ffi handler, no-op launch",
        "numba-cpu-ffi handler, trivial kernel",
        "jax.pure_callback",
    ]
