"""GPU checks and benchmarks of numba-cuda-ffi, for a machine with an NVIDIA GPU.

Run all GPU checks from the repository root with ``uv run python tools/gpu_check.py``;
this script alone with ``uv run python tools/gpu_check_numba_cuda.py``. Without uv
(an image with its own CUDA jax), put the packages on the path:

    PYTHONPATH=$(printf '%s:' packages/*/src) python tools/gpu_check.py

numba-cuda 0.30 cannot compile under NumPy 2.5 (it overloads numpy.row_stack,
which 2.5 removed; numba-cuda-ffi then raises an ImportError saying so). Where
the machine's NumPy is 2.5, put a NumPy 2.4 wheel first on the path.

What it checks, each printed as one ``CHECK`` line (see ``gpu_check.py``):

- the package's tests on the GPU, and xla-custom-kernel's GPU tests (an
  operation with a numba_cuda backend);
- the assumptions the native launcher rests on, observed from inside an FFI
  call that XLA makes: the device ordinal in XLA's call frame is the device
  that holds the call's buffers and JAX's ``local_hardware_id``; XLA's
  current context in the call is the device's primary context (the one the
  kernel's module is loaded into); the kernel loads as a cubin linked by
  nvJitLink for the device's architecture; ``cuMemAllocAsync`` and
  ``cuMemFreeAsync`` work on XLA's stream;
- with ``--xla_gpu_enable_command_buffer=CUSTOM_CALL,FUSION`` (a subprocess):
  XLA calls the custom calls while capturing its stream into a CUDA graph, the
  jitted loop of 50 launches is captured, and every replay is correct;
- per-call cost, the variants interleaved round by round in one process:
  1,000 chained tiny launches in one jit against the same chain of ``jnp``
  ops kept apart by ``optimization_barrier`` (goal <= 1.5x) and against a
  ``jax.pure_callback`` launching the same kernel (goal >= 10x slower), and a
  2**24-element float32 elementwise op against ``jnp`` (goal <= 1.1x) and
  against the same kernel launched by numba-cuda alone (goal <= 1.05x).

``--only PART ...`` (``tests``, ``assumptions``, ``graph_check``, ``benchmark``)
runs some parts.

Each performance goal is reported ``pass`` or ``MISS``; a miss does not fail the
run. Exits 0 when no check failed, 1 when one failed, 2 when there is no GPU.
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

from gpu_check import check, repeat, run_tests, subprocess_env

N_CHAIN = 1000
SIZE = 256
BIG = 2**24
BIG_CHAIN = 100
ROUNDS = 15
GOAL_VS_JNP = 1.5
GOAL_VS_CALLBACK = 10.0
GOAL_BIG_VS_JNP = 1.1
GOAL_BRIDGE_VS_ALONE = 1.05

# CUDA driver enums used by the probe.
_CU_POINTER_ATTRIBUTE_CONTEXT = 1
_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
_CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6
_CU_STREAM_CAPTURE_STATUS_ACTIVE = 1


# --- the probe: an FFI call that reports what it sees from inside XLA ---------------


def _probe_target(record: list[dict[str, int]], *, traits: int, temporary: bool = True) -> str:
    """Register a Python FFI handler on CUDA that copies its input to its output
    (through a temporary taken with ``cuMemAllocAsync`` on XLA's stream where
    ``temporary``), and appends what the driver says about the call to ``record``."""
    import ffi_core
    import ffi_core.bridge
    from numba_cuda_ffi._driver import driver

    drv = driver()
    lib = drv.lib
    size = ctypes.c_size_t

    def probe(frame: ffi_core.abi.CallFrame) -> None:
        (x,), (out,) = frame.args, frame.rets
        ordinal, stream = frame.device_ordinal(), frame.stream()
        current, stream_ctx, buffer_ctx = size(), size(), size()
        drv.check(lib.cuCtxGetCurrent(ctypes.byref(current)), "cuCtxGetCurrent")
        drv.check(lib.cuStreamGetCtx(size(stream), ctypes.byref(stream_ctx)), "cuStreamGetCtx")
        buffer_ordinal, capturing = ctypes.c_int(), ctypes.c_int()
        drv.check(
            lib.cuPointerGetAttribute(
                ctypes.byref(buffer_ordinal), _CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, size(x.data)
            ),
            "cuPointerGetAttribute(DEVICE_ORDINAL)",
        )
        drv.check(
            lib.cuPointerGetAttribute(
                ctypes.byref(buffer_ctx), _CU_POINTER_ATTRIBUTE_CONTEXT, size(x.data)
            ),
            "cuPointerGetAttribute(CONTEXT)",
        )
        drv.check(
            lib.cuStreamIsCapturing(size(stream), ctypes.byref(capturing)), "cuStreamIsCapturing"
        )
        nbytes = x.size * x.dtype.itemsize
        copy = lib.cuMemcpyDtoDAsync_v2
        copy.argtypes = [size, size, size, size]
        if temporary:
            tmp = drv.mem_alloc_async(nbytes, stream)
            drv.check(copy(tmp, x.data, nbytes, stream), "cuMemcpyDtoDAsync")
            drv.check(copy(out.data, tmp, nbytes, stream), "cuMemcpyDtoDAsync")
            drv.mem_free_async(tmp, stream)
        else:
            drv.check(copy(out.data, x.data, nbytes, stream), "cuMemcpyDtoDAsync")
        record.append(
            {
                "ordinal": ordinal,
                "buffer_ordinal": buffer_ordinal.value,
                "current": current.value,
                "stream_ctx": stream_ctx.value,
                "buffer_ctx": buffer_ctx.value,
                "primary": drv.primary_context(ordinal),
                "capturing": int(capturing.value == _CU_STREAM_CAPTURE_STATUS_ACTIVE),
            }
        )

    name = ffi_core.bridge.target_name("gpu_check.probe", traits)
    handler = ffi_core.abi.python_handler(probe, name=name, traits=traits)
    ffi_core.bridge.register_target(
        name, handler, content=f"probe:{traits}", platform="cuda", traits=traits
    )
    return name


def assumptions() -> bool:
    import ffi_core
    import jax
    import jax.numpy as jnp
    import numpy as np
    from numba import cuda
    from numba_cuda_ffi._compile import compile_kernel
    from numba_cuda_ffi._driver import driver
    from numba_cuda_ffi._spec import KernelInfo

    record: list[dict[str, int]] = []
    name = _probe_target(record, traits=ffi_core.abi.HandlerTraits.NONE)
    device = jax.devices("cuda")[0]
    x = jax.device_put(jnp.arange(4096, dtype=jnp.float32), device)
    out = jax.jit(jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(x.shape, x.dtype)))(x)
    ok = True
    ok &= check(
        "cuMemAllocAsync on XLA's stream",
        bool(np.array_equal(np.asarray(out), np.asarray(x))),
        "a temporary allocated and freed on the call frame's stream carried the data "
        "from input to output",
    )
    seen = record[-1]
    ok &= check(
        "device ordinal",
        seen["ordinal"] == seen["buffer_ordinal"] == device.local_hardware_id,
        f"call frame ordinal {seen['ordinal']}, CUDA device of the call's buffer "
        f"{seen['buffer_ordinal']}, JAX local_hardware_id {device.local_hardware_id} "
        f"(JAX id {device.id}; {len(jax.devices('cuda'))} GPU(s) visible)",
    )
    ok &= check(
        "primary context",
        seen["current"] == seen["primary"] == seen["stream_ctx"],
        f"current in the call {seen['current']:#x}, device's primary {seen['primary']:#x}, "
        f"XLA stream's {seen['stream_ctx']:#x} (the buffer's CONTEXT attribute is "
        f"{seen['buffer_ctx']:#x}: 0 for memory from a pool or virtual memory management)",
    )

    @cuda.jit
    def add_one(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + 1

    drv = driver()
    ordinal = device.local_hardware_id
    cc = drv.compute_capability(ordinal)
    info = KernelInfo(add_one)
    arrays = (ffi_core.bridge.ArraySig("float32", 1), ffi_core.bridge.ArraySig("float32", 1))
    compiled = compile_kernel(info, arrays, cc)
    _, function = drv.load_function(ordinal, compiled.image, compiled.entry, 0)
    version = ctypes.c_int()
    drv.check(
        drv.lib.cuFuncGetAttribute(
            ctypes.byref(version), _CU_FUNC_ATTRIBUTE_BINARY_VERSION, ctypes.c_size_t(function)
        ),
        "cuFuncGetAttribute(BINARY_VERSION)",
    )
    is_cubin = compiled.image[:4] == b"\x7fELF"
    ok &= check(
        "cubin through nvJitLink",
        is_cubin and version.value == cc[0] * 10 + cc[1],
        f"image is {'an ELF cubin' if is_cubin else 'PTX'} of {len(compiled.image)} bytes; "
        f"loaded function's binary version {version.value}, device sm_{cc[0]}{cc[1]}",
    )
    return ok


_GRAPH_CHECK = """
import json, jax, jax.numpy as jnp, numpy as np, ffi_core
from numba import cuda
from numba_cuda_ffi import numba_cuda_kernel
sys_path_tools = {tools!r}
import sys; sys.path.insert(0, sys_path_tools)
from gpu_check_numba_cuda import _probe_target

@cuda.jit
def add_one(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + 1

op = numba_cuda_kernel(add_one, jax.ShapeDtypeStruct((1024,), jnp.float32), launch_dims=1024)
record = []
name = _probe_target(
    record, traits=ffi_core.abi.HandlerTraits.COMMAND_BUFFER_COMPATIBLE, temporary={temporary!r}
)
probe = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((1024,), jnp.float32))

@jax.jit
def loop(x):
    for _ in range(50):
        x = op(x)
    return probe(x)

hlo = loop.lower(jnp.zeros(1024, jnp.float32)).compile().as_text()
runs = 5
calls = []
result = {{"runs": runs, "command_buffer_in_hlo": "command_buffer" in hlo}}
try:
    for step in range(runs):
        out = loop(jnp.full(1024, step, jnp.float32))
        np.testing.assert_array_equal(np.asarray(out), np.full(1024, step + 50, np.float32))
        calls.append(len(record))
    result["error"] = None
except Exception as exc:
    result["error"] = str(exc).splitlines()[0][:300]
result["calls_after_each_run"] = calls
result["probe_calls"] = len(record)
result["probe_calls_capturing"] = sum(r["capturing"] for r in record)
print("RESULT " + json.dumps(result))
"""


def graph_check() -> bool:
    env = subprocess_env()
    flags = env.get("XLA_FLAGS", "")
    env["XLA_FLAGS"] = (
        f"{flags} --xla_gpu_enable_command_buffer=CUSTOM_CALL,FUSION "
        "--xla_gpu_graph_min_graph_size=1"
    ).strip()
    seen = {}
    for temporary in (False, True):
        source = _GRAPH_CHECK.format(
            tools=os.path.dirname(os.path.abspath(__file__)), temporary=temporary
        )
        proc = subprocess.run(
            [sys.executable, "-c", source], env=env, capture_output=True, text=True, check=False
        )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            return check("command buffer", False, (proc.stdout + proc.stderr)[-2000:])
        seen[temporary] = json.loads(lines[-1][len("RESULT ") :])
    plain, temp = seen[False], seen[True]
    ok = check(
        "launch during stream capture",
        plain["error"] is None and plain["probe_calls_capturing"] >= 1,
        f"{plain['probe_calls_capturing']} of {plain['probe_calls']} calls of a custom call "
        f"after the launches came while XLA was capturing its stream (error: {plain['error']})",
    )
    ok &= check(
        "command buffer replay",
        plain["error"] is None
        and plain["probe_calls_capturing"] >= 1
        and plain["probe_calls"] < plain["runs"],
        f"{plain['runs']} runs of a loop of 50 launches, each on other inputs, all correct; "
        f"calls of the custom call after them, counted after each run: "
        f"{plain['calls_after_each_run']} (runs without a call replayed the captured graph); "
        f"'command_buffer' in the compiled HLO text: {plain['command_buffer_in_hlo']}",
    )
    check(
        "cuMemAllocAsync during capture",
        None,
        f"the same loop with a custom call taking a temporary: error {temp['error']}; "
        f"calls counted after each run {temp['calls_after_each_run']}, "
        f"{temp['probe_calls_capturing']} under capture",
    )
    return ok


# --- per-call cost --------------------------------------------------------------------


def benchmark() -> bool:
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

    two = np.float32(2)

    @cuda.jit
    def axpy2(x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = two * x[i] + y[i]

    @cuda.jit
    def axpy2_f64(x, y, out):  # the literal 2.0 makes Numba compute in float64
        i = cuda.grid(1)
        if i < out.size:
            out[i] = 2.0 * x[i] + y[i]

    @cuda.jit
    def axpy2_x4(x, y, out):  # four elements per thread, each access coalesced
        i = cuda.grid(1)
        n = cuda.gridsize(1)
        for k in range(4):
            j = i + k * n
            if j < out.size:
                out[j] = two * x[j] + y[j]

    spec = jax.ShapeDtypeStruct((SIZE,), jnp.float32)
    big_spec = jax.ShapeDtypeStruct((BIG,), jnp.float32)
    op = numba_cuda_kernel(add_one, spec, launch_dims=SIZE)
    big = numba_cuda_kernel(axpy2, big_spec, launch_dims=BIG)
    big_f64 = numba_cuda_kernel(axpy2_f64, big_spec, launch_dims=BIG)
    big_x4 = numba_cuda_kernel(axpy2_x4, big_spec, launch_dims=BIG // 4, threads_per_block=128)

    def host_launch(x):
        d = cuda.to_device(np.asarray(x))
        out = cuda.device_array_like(d)
        add_one[(SIZE + 255) // 256, 256](d, out)
        return out.copy_to_host()

    def chain(step, n):
        return jax.jit(lambda x, *rest: repeat(step, x, rest, n))

    variants = {
        "tiny ffi": (chain(lambda x: op(x), N_CHAIN), N_CHAIN, "tiny"),
        "tiny jnp+barrier": (
            chain(lambda x: jax.lax.optimization_barrier(x + 1), N_CHAIN),
            N_CHAIN,
            "tiny",
        ),
        "tiny pure_callback": (
            chain(lambda x: jax.pure_callback(host_launch, spec, x), N_CHAIN),
            N_CHAIN,
            "tiny",
        ),
        "2^24 ffi": (chain(lambda x, y: big(x, y), BIG_CHAIN), BIG_CHAIN, "big"),
        "2^24 ffi, 4 per thread, 128/block": (
            chain(lambda x, y: big_x4(x, y), BIG_CHAIN),
            BIG_CHAIN,
            "big",
        ),
        "2^24 ffi, float64 literal": (
            chain(lambda x, y: big_f64(x, y), BIG_CHAIN),
            BIG_CHAIN,
            "big",
        ),
        "2^24 jnp+barrier": (
            chain(lambda x, y: jax.lax.optimization_barrier(2.0 * x + y), BIG_CHAIN),
            BIG_CHAIN,
            "big",
        ),
    }
    tiny = jnp.zeros((SIZE,), jnp.float32)
    bx = jnp.zeros((BIG,), jnp.float32)
    by = jnp.ones((BIG,), jnp.float32)
    inputs = {"tiny": (tiny,), "big": (bx, by)}
    # Results first: a timing of a wrong result means nothing. The big chain
    # (x -> 2x + 1) must match XLA's own result bit for bit.
    ok = True
    expected = {"tiny": np.full(SIZE, N_CHAIN, np.float32)}
    expected["big"] = np.asarray(variants["2^24 jnp+barrier"][0](bx, by))
    for name, (fn, _, kind) in variants.items():
        out = np.asarray(fn(*inputs[kind]))
        if not np.array_equal(out, expected[kind]):
            ok &= check(f"result {name}", False, f"got {out[:4]}..., expected {expected[kind][:4]}")
    times: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(ROUNDS):
        order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
        for name in order:
            fn, n, kind = variants[name]
            if name == "tiny pure_callback" and round_ >= 3:
                continue  # 1,000 host round trips: three rounds suffice
            start = time.perf_counter()
            fn(*inputs[kind]).block_until_ready()
            times[name].append((time.perf_counter() - start) / n)
    per_call = {name: statistics.median(t) for name, t in times.items()}
    per_call["2^24 kernel alone (numba launch)"] = _kernel_alone(axpy2, cuda, np)
    for name, seconds in per_call.items():
        samples = len(times.get(name, ())) or ROUNDS
        check(f"per call: {name}", None, f"{seconds * 1e6:.2f} us (median of {samples})")
    vs_jnp = per_call["tiny ffi"] / per_call["tiny jnp+barrier"]
    vs_callback = per_call["tiny pure_callback"] / per_call["tiny ffi"]
    jnp_big = per_call["2^24 jnp+barrier"]
    big_vs_jnp = per_call["2^24 ffi"] / jnp_big
    x4_vs_jnp = per_call["2^24 ffi, 4 per thread, 128/block"] / jnp_big
    alone = per_call["2^24 kernel alone (numba launch)"]
    bridge = per_call["2^24 ffi"] / alone
    ok &= check(
        "tiny launches vs jnp",
        vs_jnp <= GOAL_VS_JNP,
        f"{vs_jnp:.2f}x (goal <= {GOAL_VS_JNP}x)",
        goal=True,
    )
    ok &= check(
        "tiny launches vs pure_callback",
        vs_callback >= GOAL_VS_CALLBACK,
        f"callback {vs_callback:.1f}x slower (goal >= {GOAL_VS_CALLBACK}x)",
        goal=True,
    )
    ok &= check(
        "2^24 elementwise vs jnp",
        big_vs_jnp <= GOAL_BIG_VS_JNP,
        f"{big_vs_jnp:.3f}x (goal <= {GOAL_BIG_VS_JNP}x); the same kernel launched by "
        f"numba-cuda itself: {alone / jnp_big:.3f}x; four elements per thread through the "
        f"bridge: {x4_vs_jnp:.3f}x",
        goal=True,
    )
    ok &= check(
        "2^24 elementwise: bridge vs kernel alone",
        bridge <= GOAL_BRIDGE_VS_ALONE,
        f"{bridge:.3f}x the kernel's own time (goal <= {GOAL_BRIDGE_VS_ALONE}x)",
        goal=True,
    )
    return ok


def _kernel_alone(kernel, cuda, np) -> float:
    """Seconds per launch of ``kernel`` over 2**24 elements by numba-cuda itself,
    timed with CUDA events over chains of launches: the kernel without XLA."""
    x = cuda.to_device(np.zeros(BIG, np.float32))
    y = cuda.to_device(np.ones(BIG, np.float32))
    bufs = [cuda.device_array(BIG, np.float32) for _ in range(2)]
    blocks = (BIG + 255) // 256
    stream = cuda.stream()
    kernel[blocks, 256, stream](x, y, bufs[0])
    stream.synchronize()
    samples = []
    for _ in range(ROUNDS):
        start, stop = cuda.event(), cuda.event()
        start.record(stream)
        src = x
        for k in range(BIG_CHAIN):
            kernel[blocks, 256, stream](src, y, bufs[k % 2])
            src = bufs[k % 2]
        stop.record(stream)
        stop.synchronize()
        samples.append(cuda.event_elapsed_time(start, stop) / 1e3 / BIG_CHAIN)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        action="append",
        choices=["tests", "assumptions", "graph_check", "benchmark"],
        help="run only these parts (repeatable); all by default",
    )
    only = set(parser.parse_args(argv).only or ())
    try:
        from numba import cuda
    except ImportError as exc:
        check("numba-cuda", False, f"cannot import numba.cuda: {exc}")
        return 1
    if not cuda.is_available():
        check("GPU", None, "no GPU visible to numba-cuda: nothing to check")
        return 2
    from importlib.metadata import version

    import jax
    import numba
    import numpy

    gpu = cuda.get_current_device().name
    gpu = gpu.decode() if isinstance(gpu, bytes) else gpu
    check(
        "versions",
        None,
        f"{gpu}; python {sys.version.split()[0]}, jax {jax.__version__}, numpy {numpy.__version__}, "
        f"numba {numba.__version__}, numba-cuda {version('numba-cuda')}",
    )
    if not jax.devices()[0].platform == "gpu":
        check(
            "JAX GPU",
            False,
            f"JAX's default device is {jax.devices()[0]}: install JAX's CUDA plugin "
            "(`uv sync --group gpu` in this repository)",
        )
        return 1
    ok = True
    if not only or "tests" in only:
        ok &= _tests()
    for part in (assumptions, graph_check, benchmark):
        if only and part.__name__ not in only:
            continue
        try:
            ok &= part()
        except Exception as exc:  # one broken part must not hide the others
            import traceback

            ok &= check(part.__name__, False, "".join(traceback.format_exception(exc))[-2000:])
    return 0 if ok else 1


def _tests() -> bool:
    return run_tests(["packages/numba-cuda-ffi", "packages/xla-custom-kernel/tests/test_gpu.py"])


if __name__ == "__main__":
    sys.exit(main())
