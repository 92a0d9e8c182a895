"""GPU checks and benchmarks of numba-cuda-ffi, for a machine with an NVIDIA GPU.

Run from the repository root:

    PYTHONPATH=packages/ffi-core/src:packages/numba-cuda-ffi/src \
        python tools/gpu_check_numba_cuda.py

numba-cuda 0.30 cannot compile under NumPy 2.5 (it overloads numpy.row_stack,
which 2.5 removed; numba-cuda-ffi then raises an ImportError saying so). Where
the machine's NumPy is 2.5, put a NumPy 2.4 wheel first on the path, e.g. one
fetched with ``pip download --no-deps --only-binary=:all: numpy==2.4.6`` for
the machine's Python and installed with ``pip install --no-deps --target``.

It prints the versions it runs with, runs the package's GPU tests, then times 1,000 chained tiny launches inside
one jit against the same chain of jnp ops kept apart by optimization_barrier
and against a jax.pure_callback launching the same kernel, then checks in a
subprocess with XLA command buffers enabled that a jitted loop of launches is
captured and replays correctly. Prints a summary; exits non-zero on failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

N_CHAIN = 1000
SIZE = 256
GOAL_VS_JNP = 1.5
GOAL_VS_CALLBACK = 10.0


def _timeit(fn, *args, repeats=20):
    fn(*args).block_until_ready()  # compile
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return best


def benchmark() -> dict[str, float]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from numba import cuda
    from numba_cuda_ffi import numba_cuda_kernel

    @cuda.jit
    def add_one(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + 1

    spec = jax.ShapeDtypeStruct((SIZE,), jnp.float32)
    op = numba_cuda_kernel(add_one, spec, launch_dims=SIZE)

    @jax.jit
    def chain_ffi(x):
        for _ in range(N_CHAIN):
            x = op(x)
        return x

    @jax.jit
    def chain_jnp(x):
        for _ in range(N_CHAIN):
            x = jax.lax.optimization_barrier(x + 1)
        return x

    def host_launch(x):
        d = cuda.to_device(np.asarray(x))
        out = cuda.device_array_like(d)
        add_one[(SIZE + 255) // 256, 256](d, out)
        return out.copy_to_host()

    @jax.jit
    def chain_callback(x):
        for _ in range(N_CHAIN):
            x = jax.pure_callback(host_launch, spec, x)
        return x

    x = jnp.zeros((SIZE,), jnp.float32)
    results = {}
    for name, fn in (("ffi", chain_ffi), ("jnp", chain_jnp), ("callback", chain_callback)):
        out = fn(x)
        np.testing.assert_array_equal(np.asarray(out), np.full(SIZE, N_CHAIN, np.float32))
        results[name] = _timeit(fn, x, repeats=5 if name == "callback" else 20) / N_CHAIN
    return results


_GRAPH_CHECK = """
import jax, jax.numpy as jnp, numpy as np
from numba import cuda
from numba_cuda_ffi import numba_cuda_kernel

@cuda.jit
def add_one(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + 1

op = numba_cuda_kernel(add_one, jax.ShapeDtypeStruct((1024,), jnp.float32), launch_dims=1024)

@jax.jit
def loop(x):
    for _ in range(50):
        x = op(x)
    return x

hlo = loop.lower(jnp.zeros(1024, jnp.float32)).compile().as_text()
for step in range(3):
    out = loop(jnp.full(1024, step, jnp.float32))
    np.testing.assert_array_equal(np.asarray(out), np.full(1024, step + 50, np.float32))
print("command_buffer_in_hlo", "command_buffer" in hlo)
print("replays_correctly True")
"""


def graph_check() -> tuple[bool, str]:
    env = dict(os.environ)
    flags = env.get("XLA_FLAGS", "")
    env["XLA_FLAGS"] = (
        f"{flags} --xla_gpu_enable_command_buffer=CUSTOM_CALL,FUSION "
        "--xla_gpu_graph_min_graph_size=1"
    ).strip()
    proc = subprocess.run(
        [sys.executable, "-c", _GRAPH_CHECK], env=env, capture_output=True, text=True
    )
    ok = proc.returncode == 0 and "command_buffer_in_hlo True" in proc.stdout
    return ok, (proc.stdout + proc.stderr)[-3000:]


def main() -> int:
    from numba import cuda

    if not cuda.is_available():
        print("no GPU visible to numba-cuda: nothing to check")
        return 2
    from importlib.metadata import version

    import jax
    import numba
    import numpy

    print(
        f"python {sys.version.split()[0]}, jax {jax.__version__}, numpy {numpy.__version__}, "
        f"numba {numba.__version__}, numba-cuda {version('numba-cuda')}"
    )
    failures = []
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "packages/numba-cuda-ffi"],
    )
    if tests.returncode != 0:
        failures.append("GPU tests")
    per_call = benchmark()
    vs_jnp = per_call["ffi"] / per_call["jnp"]
    vs_callback = per_call["callback"] / per_call["ffi"]
    graphs_ok, graph_log = graph_check()
    print("\n== numba-cuda-ffi on", cuda.get_current_device().name)
    print(f"tests: {'passed' if tests.returncode == 0 else 'FAILED'}")
    for name, seconds in per_call.items():
        print(f"per call ({name}): {seconds * 1e6:.2f} us")
    print(f"ffi / jnp+barrier: {vs_jnp:.2f}x (goal <= {GOAL_VS_JNP}x)")
    print(f"callback / ffi: {vs_callback:.1f}x (goal >= {GOAL_VS_CALLBACK}x)")
    print(f"command buffer capture and replay: {'ok' if graphs_ok else 'FAILED'}")
    if not graphs_ok:
        print(graph_log)
        failures.append("command buffers")
    if vs_jnp > GOAL_VS_JNP:
        failures.append("per-call goal vs jnp")
    if vs_callback < GOAL_VS_CALLBACK:
        failures.append("per-call goal vs callback")
    print("summary:", "all checks passed" if not failures else "FAILED: " + ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
