"""Host-side cost of numba-cuda-ffi's native launch handler, measured on a CPU.

On a machine without a GPU, run the real generated handler (buffer checks,
device ordinal from the call frame, the function table, parameter packing)
under XLA on the CPU, with ``cuLaunchKernel`` and the context calls replaced by
native no-ops and the stream by a stand-in (XLA's CPU runtime has none; an API
call of the same kind is made in its place), and time 1,000 chained calls
inside one jit. What
is left is the handler's own work per launch plus XLA's cost of a custom call,
the part of a launch that Python-free dispatch is about; the driver's
``cuLaunchKernel`` (a few microseconds on current GPUs) comes on top on a GPU.
The same chain through ``numba_cpu_ffi.numba_kernel`` (a native CPU handler
that runs a trivial kernel) and through a ``jax.pure_callback`` are timed for
scale.

    uv run python tools/bench_numba_cuda_handler.py [--calls 1000] [--repeats 20]
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import time

import ffi_core
import jax
import jax.numpy as jnp
from ffi_core import native as nv
from ffi_core.cuda import CTX_FN, LAUNCH_FN, NativeDriver, _target
from jax.interpreters import mlir
from numba import cfunc, cuda, njit, types
from numba_cpu_ffi import numba_kernel
from numba_cuda_ffi import _primitive, numba_cuda_kernel

CONTEXT = 77
_u32 = types.uint32
_LAUNCHES = ctypes.c_int64(0)  # counted by the no-op launch: the handler did launch
_LAUNCHES_AT = ctypes.addressof(_LAUNCHES)


@cfunc(
    types.int32(
        types.uintp, _u32, _u32, _u32, _u32, _u32, _u32, _u32, types.uintp, types.uintp, types.uintp
    )
)
def _no_launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    nv.store(_LAUNCHES_AT, nv.load(_LAUNCHES_AT, types.int64) + 1, types.int64)
    return 0


@cfunc(types.int32(types.uintp))
def _current_context(out):
    nv.store(out, CONTEXT, types.uintp)
    return 0


@cfunc(types.int32(types.uintp))
def _no_op(ctx):
    return 0


@njit
def _stream_get_on_cpu(frame):
    # XLA's CPU runtime has no stream (XLA_FFI_Stream_Get fails there): make
    # the same kind of API call, for the device ordinal, and give a stand-in.
    error, _ = nv.device_ordinal_get(frame)
    return error, types.uintp(0x5000)


class _NoGPU:
    """The driver calls the lowering makes, answered without a GPU."""

    native = NativeDriver(
        launch=LAUNCH_FN(_no_launch.address),
        ctx_get_current=CTX_FN(_current_context.address),
        ctx_push=CTX_FN(_no_op.address),
        ctx_pop=CTX_FN(_no_op.address),
        error_name=str,
    )

    def compute_capability(self, ordinal):
        return (9, 0)

    def load_function(self, ordinal, image, entry, shared_mem):
        return CONTEXT, 1


@dataclasses.dataclass(frozen=True)
class _Device:
    local_hardware_id: int = 0


def _lower_cuda_path_on_cpu() -> None:
    def register_on_cpu(name, handler, *, content, platform, traits, pin):
        return ffi_core.register_target(name, handler, content=content, platform="cpu", pin=pin)

    nv.stream_get = _stream_get_on_cpu  # read when a handler is generated
    _target._jax_cuda_devices = lambda: (_Device(),)
    _target.driver = lambda: _NoGPU()
    _target.register_target = register_on_cpu
    mlir.register_lowering(
        _primitive.numba_cuda_call_p, _primitive._numba_cuda_call_lowering, platform="cpu"
    )


def _per_call(fn, x, calls: int, repeats: int) -> float:
    jax.block_until_ready(fn(x))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(x))
        best = min(best, time.perf_counter() - start)
    return best / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    _lower_cuda_path_on_cpu()

    @cuda.jit
    def add_one(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + 1

    @njit
    def add_one_cpu(x, out):
        for i in range(x.size):
            out[i] = x[i] + 1

    spec = jax.ShapeDtypeStruct((256,), jnp.float32)
    ops = {
        "numba-cuda-ffi handler, no-op launch": numba_cuda_kernel(add_one, spec, launch_dims=256),
        "numba-cpu-ffi handler, trivial kernel": numba_kernel(add_one_cpu, spec),
        "jax.pure_callback": lambda v: jax.pure_callback(lambda a: a + 1, spec, v),
    }
    x = jnp.zeros(256, jnp.float32)
    print(f"{args.calls} chained calls in one jit, best of {args.repeats}, per call:")
    for name, op in ops.items():

        def chain(v, op=op):
            for _ in range(args.calls):
                v = op(v)
            return v

        fn = jax.jit(chain)
        repeats = args.repeats if "callback" not in name else 3
        before = _LAUNCHES.value
        seconds = _per_call(fn, x, args.calls, repeats)
        print(f"  {name:40s} {seconds * 1e6:8.3f} us")
        if "numba-cuda-ffi" in name:
            launched = _LAUNCHES.value - before
            assert launched == args.calls * (repeats + 1), launched


if __name__ == "__main__":
    main()
