"""What building a new GPU kernel costs in each GPU bridge, against its own
library's compile of the same kernel, and what a cached build costs; on the
CPU (every compile here runs without a GPU, for sm_80).

Run: ``uv run python tools/bench_gpu_compile.py`` (``--processes N``,
``--kernels K``, ``--bridges numba-cuda,triton,nvrtc``; ``--json FILE`` to
keep the figures).

Each candidate runs in fresh processes, several times, in alternating order
(A B C ..., then ... C B A). In each process ``K`` new kernels are built one
after the other, each differing by one constant (a closure value for
numba-cuda, a ``tl.constexpr`` for Triton, a literal in the source for NVRTC),
and each build is timed alone, imports excluded. The first build of a process
pays the compiler's one-time set-up and is reported apart; the figure per new
kernel is the median over builds 2..K. Candidates, per bridge:

- the library's own compile: ``numba.cuda.compile_ptx``; ``triton.compile``
  (with an empty ``TRITON_CACHE_DIR``, and with one filled by an earlier
  process: Triton's own disk cache); NVRTC's ``nvrtcCompileProgram`` (through
  cuda-source-ffi's ctypes binding, no cache);
- the bridge's build with an empty disk cache (``cold``): numba-cuda-ffi's
  ``compile_kernel`` (PTX, then a cubin from nvJitLink), triton-ffi's
  ``compile_triton``, cuda-source-ffi's ``compile_source``;
- the same builds in a fresh process whose disk cache an earlier process
  filled (``cached``).
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

_NUMBA = """
from numba import cuda
from numba_cuda_ffi._compile import compile_kernel
from numba_cuda_ffi._spec import ArraySig, KernelInfo
import numba

def make(c):
    @cuda.jit
    def scale_add(x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = c * x[i] + y[i]
    return scale_add

arrays = (ArraySig("float32", 1),) * 3
types = (numba.float32[::1],) * 3
def own(j):
    cuda.compile_ptx(make(0.5 + j).py_func, types, cc=(8, 0))
def bridge(j):
    compile_kernel(KernelInfo(make(0.5 + j)), arrays, (8, 0))
"""

_TRITON = """
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler.compiler import ASTSource
from triton_ffi import compile_triton

@triton.jit
def scale_add(x, y, out, n, C: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, C * tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask),
             mask=mask)

sig = {"x": "*float32", "y": "*float32", "out": "*float32", "n": "int32"}
tsig = {"x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32", "C": "constexpr",
        "BLOCK": "constexpr"}
attrs = {(i,): [["tt.divisibility", 16]] for i in range(3)}
def own(j):
    src = ASTSource(scale_add, tsig, {"C": 0.5 + j, "BLOCK": 256}, attrs)
    triton.compile(src, target=GPUTarget("cuda", 80, 32), options={"num_warps": 4})
def bridge(j):
    compile_triton(scale_add, sig, {"C": 0.5 + j, "BLOCK": 256}, cc=(8, 0))
"""

_NVRTC = """
from cuda_source_ffi import compile_source
from cuda_source_ffi._nvrtc_library import _run_nvrtc

def source(j):
    return ('extern "C" __global__ void scale_add(const float* x, const float* y, float* out,'
            ' int n) { int i = blockIdx.x * blockDim.x + threadIdx.x;'
            f' if (i < n) out[i] = {0.5 + j!r}f * x[i] + y[i]; }}')
def own(j):
    result = _run_nvrtc(source(j).encode(), "k.cu", ("scale_add",),
                        ("--gpu-architecture=sm_80", "-default-device", "-std=c++17"))
    assert result.ok
def bridge(j):
    compile_source(source(j), name="k.cu", kernels=["scale_add"], arch=(8, 0))
"""

#: bridge -> (set-up script, its library's compile in words, the cache variable).
_BRIDGES = {
    "numba-cuda": (_NUMBA, "numba.cuda.compile_ptx", "NUMBA_CUDA_FFI_CACHE_DIR"),
    "triton": (_TRITON, "triton.compile", "TRITON_FFI_CACHE_DIR"),
    "nvrtc": (_NVRTC, "NVRTC nvrtcCompileProgram", "CUDA_SOURCE_FFI_CACHE_DIR"),
}

_TAIL = """
import json, time
times = []
for j in range(KERNELS):
    start = time.perf_counter()
    FUNCTION(j)
    times.append(time.perf_counter() - start)
print(json.dumps(times))
"""


def _run(script: str, function: str, env: dict[str, str], kernels: int) -> list[float]:
    source = script + _TAIL.replace("KERNELS", str(kernels)).replace("FUNCTION", function)
    # A file, not ``-c``: Triton reads a kernel's source from its file.
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as job:
        job.write(source)
    try:
        out = subprocess.run(
            [sys.executable, job.name], env=env, check=True, capture_output=True, text=True
        ).stdout
    finally:
        os.unlink(job.name)
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=3, help="fresh processes per candidate")
    parser.add_argument("--kernels", type=int, default=5, help="new kernels per process")
    parser.add_argument("--bridges", default=",".join(_BRIDGES), help="comma-separated")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    bridges = args.bridges.split(",")
    unknown = sorted(set(bridges) - set(_BRIDGES))
    if unknown:
        parser.error(f"--bridges: unknown {unknown}; known: {', '.join(_BRIDGES)}")

    results: dict[str, list[list[float]]] = {}
    with tempfile.TemporaryDirectory() as work:
        base = {k: v for k, v in os.environ.items() if not k.endswith("_CACHE_DIR")}
        for bridge in bridges:
            script, own, env_var = _BRIDGES[bridge]
            warm = tempfile.mkdtemp(dir=work)
            triton_warm = tempfile.mkdtemp(dir=work)
            _run(script, "bridge", {**base, env_var: warm}, args.kernels)
            # name -> (function, cache variable, its directory; None: a fresh one)
            candidates: dict[str, tuple[str, str, str | None]] = {
                own: ("own", "TRITON_CACHE_DIR", None),
                f"{bridge} bridge, cold": ("bridge", env_var, None),
                f"{bridge} bridge, cached": ("bridge", env_var, warm),
            }
            if bridge == "triton":
                _run(script, "own", {**base, "TRITON_CACHE_DIR": triton_warm}, args.kernels)
                candidates["triton.compile, its own cache"] = (
                    "own",
                    "TRITON_CACHE_DIR",
                    triton_warm,
                )
            names = list(candidates)
            for name in names:
                results[name] = []
            for p in range(args.processes):
                for name in names if p % 2 == 0 else names[::-1]:
                    function, variable, directory = candidates[name]
                    env = {**base, variable: directory or tempfile.mkdtemp(dir=work)}
                    results[name].append(_run(script, function, env, args.kernels))

    summary = {}
    print(f"{'candidate':<34} {'per new kernel (ms)':>20} {'range':>12} {'first (ms)':>11}")
    for name, runs in results.items():
        per_process = [statistics.median(r[1:]) * 1e3 for r in runs]
        first = [r[0] * 1e3 for r in runs]
        summary[name] = {
            "per_kernel_ms": statistics.median(per_process),
            "per_kernel_ms_range": [min(per_process), max(per_process)],
            "first_ms": statistics.median(first),
        }
        lo, hi = summary[name]["per_kernel_ms_range"]
        print(
            f"{name:<34} {summary[name]['per_kernel_ms']:>20.1f} {f'{lo:.0f}-{hi:.0f}':>12} "
            f"{summary[name]['first_ms']:>11.0f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
