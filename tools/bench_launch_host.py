"""Host-side cost per launch of every GPU bridge through the shared launcher,
measured on a CPU in one run, with the CUDA driver replaced by native no-ops.

    uv run python tools/bench_launch_host.py [--calls 1000] [--repeats 20]
        [--bridges numba-cuda,triton,cuda-source,...]   # rows to time, in order

Each row's op is a tiny elementwise add, ``out = x + y`` on float32[256],
called ``--calls`` times in a chain (``x = op(x, y)``) inside one ``jax.jit``.
The GPU bridges (numba-cuda-ffi ``numba_cuda_kernel``, triton-ffi
``triton_kernel``, cuda-source-ffi ``load_cuda_inline(...).kernel``, warp-ffi
``warp_kernel`` with Warp's CUDA build) go
through their real CUDA lowering on the CPU: the kernel is compiled for sm_90
as on a GPU machine (never loaded), and the real handler that
``ffi_core.bridge.cuda`` generates for it is registered as a CPU FFI target, which
XLA's CPU runtime calls natively, with no Python per call.

What is measured, per call: XLA's CPU runtime calling a custom call (thunk
and call frame, scalar attributes included), and the handler's own work: the
metadata and stage checks, buffer count, dtype and rank checks, attribute
checks, the stream and device ordinal read from the call frame (XLA's CPU
runtime has no stream: an API call of the same kind, for the device ordinal,
stands in for it), the per-device function table, the parameters packed by
the kernel's ``ParamLayout``, the calls of ``cuCtxGetCurrent`` and
``cuLaunchKernel``. Both are native no-ops here: the first answers the
kernel's own context (so there is no push or pop), the second only counts (the
tool checks that every call launched once).

What is not measured: the driver's ``cuLaunchKernel`` and ``cuCtxGetCurrent``
themselves (the launch is a few microseconds on current GPUs, in the driver);
the kernel (it never runs: outputs are left unwritten); XLA's GPU runtime,
whose per-thunk cost is not the CPU runtime's; CUDA-graph replay (with
command buffers XLA calls the handler at capture, not at every replay); the
lowering and compile (done once, before timing). On a GPU a launch costs
about this plus the driver's ``cuLaunchKernel``.

Reference rows, timed the same way: numba-cpu-ffi's ``numba_kernel`` (a native
CPU handler running the add); a no-op native FFI handler with the same buffers
(XLA's own cost of a custom call, the reference of the ratio column), and the
same called with one int32 attribute (the triton and cuda-source adds take
``n`` as one: XLA's cost of passing it); ``jax.pure_callback(np.add)``
(Python at every call); ``jnp.add``, which XLA fuses, the whole chain, into
one loop (an optimization barrier does not stop that on the CPU): its figure
is the arithmetic, with no per-op cost.

The rows are timed round-robin: each of ``--repeats`` rounds times every row
once, in the ``--bridges`` order, so machine noise hits them alike. A timing
runs the jitted chain several times (enough for about 5 ms). Per call is the
median over the rounds of (chain time - an empty jit's call time, timed in the
same round) / ``--calls``; the ratio is the median of the per-round ratios to
the no-op row. Adding a bridge is one entry of ``BRIDGES``.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import math
import os
import platform
import statistics
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numba
import numpy as np
from ffi_core.abi import native as nv
from jax.interpreters import mlir
from numba import types

N = 256
SPEC = jax.ShapeDtypeStruct((N,), jnp.float32)
_TARGET_SECONDS = 0.005  # one timing: enough chain calls for about this long

Op = Callable[[jax.Array, jax.Array], jax.Array]


@dataclasses.dataclass(frozen=True)
class Bridge:
    """One row: ``build()`` returns ``op(x, y) -> x + y`` on float32[N].

    A GPU bridge's ``build`` registers its primitive's CUDA lowering for the
    CPU (:func:`lower_on_cpu`) and wraps the kernel as the bridge's users do;
    ``launches`` says its calls go through the shared launcher, so each call
    must reach the no-op ``cuLaunchKernel`` once.
    """

    name: str
    label: str
    build: Callable[[], Op]
    launches: bool = False


# ------------------------------------------------- the driver, as native no-ops

_CONTEXT = 77  # the context the loaded "module" lives in, and the current one
_LAUNCHES = ctypes.c_int64(0)  # counted by the no-op launch
_LAUNCHES_AT = ctypes.addressof(_LAUNCHES)
_u32 = types.uint32


@numba.cfunc(
    types.int32(
        types.uintp, _u32, _u32, _u32, _u32, _u32, _u32, _u32, types.uintp, types.uintp, types.uintp
    )
)
def _no_launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    nv.store(_LAUNCHES_AT, nv.load(_LAUNCHES_AT, types.int64) + 1, types.int64)
    return 0


@numba.cfunc(types.int32(types.uintp))
def _current_context(out):
    nv.store(out, _CONTEXT, types.uintp)
    return 0


@numba.cfunc(types.int32(types.uintp))
def _no_op_ctx(ctx):
    return 0


@numba.njit(inline="always")
def _stream_get_on_cpu(frame):
    # XLA's CPU runtime has no stream (XLA_FFI_Stream_Get fails there): make
    # the same kind of API call, for the device ordinal, and give a stand-in.
    error, _ = nv.device_ordinal_get(frame)
    return error, types.uintp(0x5000)


class _NoGPU:
    """What the launcher asks of the driver, answered without a GPU."""

    def __init__(self) -> None:
        from ffi_core.bridge.cuda import CTX_FN, LAUNCH_FN, NativeDriver

        self.native = NativeDriver(
            launch=LAUNCH_FN(_no_launch.address),
            ctx_get_current=CTX_FN(_current_context.address),
            ctx_push=CTX_FN(_no_op_ctx.address),
            ctx_pop=CTX_FN(_no_op_ctx.address),
            error_name=str,
        )

    def compute_capability(self, ordinal: int) -> tuple[int, int]:
        return (9, 0)

    def load_function(self, ordinal, image, entry, shared_mem) -> tuple[int, int]:
        return _CONTEXT, 1  # (context, CUfunction): the image is never loaded


def _install_no_gpu() -> None:
    """Make ``ffi_core.bridge.cuda`` see one GPU driven by the no-ops, and register
    its handlers as CPU FFI targets (this process only)."""
    from ffi_core.bridge import register_target
    from ffi_core.bridge.cuda import _target
    from ffi_core.bridge.cuda.testing import EmulatedDevice

    gpu = _NoGPU()

    def register_on_cpu(name, handler, *, content, platform, traits, pin):
        return register_target(name, handler, content=content, platform="cpu", pin=pin)

    nv.stream_get = _stream_get_on_cpu  # read when a handler is generated
    _target._jax_cuda_devices = lambda: (EmulatedDevice(),)
    _target._handlers = {}
    _target.driver = lambda: gpu
    _target.register_target = register_on_cpu


def lower_on_cpu(primitive, cuda_rule) -> None:
    """Lower ``primitive`` on the CPU with its CUDA rule (this process only)."""
    mlir.register_lowering(primitive, cuda_rule, platform="cpu")


# ------------------------------------------------------------------ the bridges


def _numba_cuda() -> Op:
    from numba import cuda
    from numba_cuda_ffi import _primitive, numba_cuda_kernel

    lower_on_cpu(_primitive.numba_cuda_call_p, _primitive._numba_cuda_call_lowering)

    @cuda.jit
    def add(x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + y[i]

    return numba_cuda_kernel(add, SPEC, launch_dims=N)


def _lower_launch_p_on_cpu() -> None:
    from ffi_core.bridge.cuda import cuda_launch_lowering, cuda_launch_p

    lower_on_cpu(cuda_launch_p, cuda_launch_lowering)


def _triton() -> Op:
    import triton
    import triton.language as tl
    from triton_ffi import triton_kernel

    _lower_launch_p_on_cpu()

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = i < n
        x = tl.load(x_ptr + i, mask=mask)
        tl.store(out_ptr + i, x + tl.load(y_ptr + i, mask=mask), mask=mask)

    op = triton_kernel(add, SPEC, grid=triton.cdiv(N, 256), BLOCK=256)
    return lambda x, y: op(x, y, n=N)


_CUDA_ADD = """
extern "C" __global__ void add(const float* x, const float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}
"""


def _cuda_source() -> Op:
    from cuda_source_ffi import load_cuda_inline

    _lower_launch_p_on_cpu()
    module = load_cuda_inline(_CUDA_ADD, kernels={"add": ["in", "in", "out", "n:int32"]})
    op = module.kernel("add", SPEC, launch_dims=N)
    return lambda x, y: op(x, y, n=N)


def _warp() -> Op:
    import warp as wp
    from warp_ffi import _primitive, warp_kernel

    wp.config.log_level = wp.LOG_WARNING  # this process's Warp: no banner
    lower_on_cpu(_primitive.warp_kernel_call_p, _primitive._cuda_lowering)

    @wp.kernel
    def add(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32),
            out: wp.array(dtype=wp.float32)):  # fmt: skip
        i = wp.tid()
        out[i] = x[i] + y[i]

    return warp_kernel(add, SPEC)


def _numba_cpu() -> Op:
    from numba_cpu_ffi import numba_kernel

    @numba.njit
    def add(x, y, out):
        for i in range(x.size):
            out[i] = x[i] + y[i]

    return numba_kernel(add, SPEC)


@numba.cfunc(types.uintp(types.uintp))
def _noop_handler(frame):
    # The least a native FFI handler does: answer the metadata query, return.
    if nv.is_metadata_query(frame):
        return nv.answer_metadata(frame, 0)
    return 0


def _noop_call() -> Callable[..., jax.Array]:
    import ffi_core
    import ffi_core.bridge

    name = ffi_core.bridge.target_name("bench_launch_host.noop", "v1")
    ffi_core.bridge.register_target(name, _noop_handler, content="v1")
    return jax.ffi.ffi_call(name, SPEC)  # two inputs, one output; writes nothing


def _noop() -> Op:
    return _noop_call()


def _noop_attr() -> Op:
    call = _noop_call()  # with the scalar attribute triton's and cuda-source's adds get
    return lambda x, y: call(x, y, n=np.int32(N))


def _pure_callback() -> Op:
    return lambda x, y: jax.pure_callback(np.add, SPEC, x, y)


def _jnp_fused() -> Op:
    return jnp.add


BRIDGES: tuple[Bridge, ...] = (
    Bridge(
        "numba-cuda",
        "numba-cuda-ffi numba_cuda_kernel, launcher handler, no-op launch",
        _numba_cuda,
        launches=True,
    ),
    Bridge(
        "triton",
        "triton-ffi triton_kernel, launcher handler, no-op launch",
        _triton,
        launches=True,
    ),
    Bridge(
        "cuda-source",
        "cuda-source-ffi load_cuda_inline(...).kernel, launcher handler, no-op launch",
        _cuda_source,
        launches=True,
    ),
    Bridge(
        "warp",
        "warp-ffi warp_kernel on a GPU (Warp's CUDA build), launcher handler, no-op launch",
        _warp,
        launches=True,
    ),
    Bridge(
        "numba-cpu", "numba-cpu-ffi numba_kernel, native CPU handler running the add", _numba_cpu
    ),
    Bridge("noop", "no-op native FFI handler, same buffers (the ratio's reference)", _noop),
    Bridge("noop-attr", "the same no-op handler, called with one int32 attribute", _noop_attr),
    Bridge("pure-callback", "jax.pure_callback(np.add): Python at every call", _pure_callback),
    Bridge("jnp", "jnp.add, the chain fused by XLA into one loop", _jnp_fused),
)
REFERENCE = "noop"


# ------------------------------------------------------------------- measuring


def _chain(op: Op, calls: int) -> Callable[[jax.Array, jax.Array], jax.Array]:
    def chain(x, y):
        for _ in range(calls):
            x = op(x, y)
        return x

    return jax.jit(chain)


def _time(fn, x, y, inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        out = fn(x, y)
    jax.block_until_ready(out)
    return (time.perf_counter() - start) / inner


def _inner(fn, x, y) -> int:
    once = _time(fn, x, y, 1)
    return max(1, math.ceil(_TARGET_SECONDS / max(once, 1e-9)))


def measure(bridges: list[Bridge], calls: int, repeats: int) -> dict[str, dict[str, float]]:
    """Per call (µs) and the ratio to the reference of each bridge, and the
    empty jit's call time, from ``repeats`` round-robin rounds."""
    x = jnp.zeros(N, jnp.float32)
    y = jnp.ones(N, jnp.float32)
    fns = {b.name: _chain(b.build(), calls) for b in bridges}
    fns[""] = jax.jit(lambda x, y: x)  # the empty jit call, subtracted
    launching = {b.name for b in bridges if b.launches}
    inner = {}
    for name, fn in fns.items():  # compile, warm up, size each timing
        jax.block_until_ready(fn(x, y))
        inner[name] = _inner(fn, x, y)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            before = _LAUNCHES.value
            times[name].append(_time(fn, x, y, inner[name]))
            launched = _LAUNCHES.value - before
            expected = calls * inner[name] if name in launching else 0
            if launched != expected:
                raise AssertionError(f"{name}: {launched} launches, expected {expected}")
    empty = times.pop("")
    per_call = {
        name: [(t - e) / calls for t, e in zip(ts, empty, strict=True)]
        for name, ts in times.items()
    }
    results = {}
    for name, values in per_call.items():
        row = {"us": statistics.median(values) * 1e6}
        if REFERENCE in per_call:
            ratios = [a / b for a, b in zip(values, per_call[REFERENCE], strict=True)]
            row["ratio"] = statistics.median(ratios)
        results[name] = row
    results[""] = {"us": statistics.median(empty) * 1e6}
    return results


def _versions() -> str:
    import importlib.metadata as md

    names = ("jax", "numba", "numba-cuda", "triton")
    found = []
    for name in names:
        try:
            found.append(f"{name} {md.version(name)}")
        except md.PackageNotFoundError:
            pass
    cpus = os.cpu_count()
    return f"{cpus} CPUs, Python {platform.python_version()}, " + ", ".join(found)


def main() -> None:
    by_name = {b.name: b for b in BRIDGES}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="chained calls in one jit")
    parser.add_argument("--repeats", type=int, default=20, help="round-robin rounds")
    parser.add_argument(
        "--bridges",
        default=",".join(by_name),
        help="comma-separated rows to time, in this order (default: %(default)s)",
    )
    args = parser.parse_args()
    if args.calls < 1 or args.repeats < 1:
        parser.error("--calls and --repeats must be at least 1")
    names = [n.strip() for n in args.bridges.split(",") if n.strip()]
    unknown = [n for n in names if n not in by_name]
    if unknown or len(set(names)) != len(names) or not names:
        parser.error(f"--bridges: give distinct names out of {', '.join(by_name)}")
    bridges = [by_name[n] for n in names]

    _install_no_gpu()
    results = measure(bridges, args.calls, args.repeats)
    empty = results[""]["us"]
    print(
        f"{args.calls} chained calls of x + y (float32[{N}]) in one jit, median of "
        f"{args.repeats} round-robin rounds, per call less an empty jit call "
        f"({empty:.1f} us); cuLaunchKernel is a native no-op; {_versions()}"
    )
    print(f"  {'bridge':<14}{'us/call':>9}{'x ' + REFERENCE:>9}  what runs")
    for b in bridges:
        row = results[b.name]
        ratio = f"{row['ratio']:.2f}" if "ratio" in row else "-"
        print(f"  {b.name:<14}{row['us']:>9.3f}{ratio:>9}  {b.label}")


if __name__ == "__main__":
    main()
