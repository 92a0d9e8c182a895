"""GPU checks and benchmarks of triton-ffi, cuda-source-ffi and warp-ffi on an NVIDIA GPU.

Run all GPU checks from the repository root with ``uv run python tools/gpu_check.py``;
this script alone with ``uv run python tools/gpu_check_bridges.py`` (``--only PART``,
repeatable: ``tests``, ``correctness``, ``graph_check``, ``benchmark``). Without uv
(an image with its own CUDA jax), put the packages on the path:

    PYTHONPATH=$(printf '%s:' packages/*/src) python tools/gpu_check.py

The three bridges launch through ffi-core's native CUDA launcher
(``ffi_core.bridge.cuda``): ``triton_ffi.triton_kernel``,
``cuda_source_ffi.load_cuda_inline(...).kernel(...)`` and ``warp_ffi.warp_kernel``
on a CUDA device (Warp's CUDA build of the kernel; gradients through Warp's
adjoint kernel). What it checks, each printed as one ``CHECK`` line (see
``gpu_check.py``):

- the three packages' tests on the GPU machine (most of them run on ffi-core's
  emulated GPU; a subprocess);
- results on the GPU, for each bridge, against NumPy or ``jnp``: an elementwise
  kernel with a scalar parameter under ``jit`` (two values, as attributes),
  ``vmap`` (the default method: one native call launching once per batch
  element), ``lax.scan`` and ``input_output_aliases``; for Triton, a ``grid``
  callable of the meta-parameters; for CUDA source, a ``launch_dims`` callable
  of the call's scalars (the kernel reports the threads it was launched with);
  for Warp, a 2-d launch, a generic (``Any``) kernel at two dtypes, and
  ``jax.grad`` in float64 against a pure-``jnp`` reference and
  ``jax.test_util.check_grads``; with two GPUs or more, a call placed on device
  1 runs there (its result on that device and correct; an ``info`` line where
  there is one GPU);
- with ``--xla_gpu_enable_command_buffer=CUSTOM_CALL,FUSION`` (a subprocess): a
  jitted loop of 50 launches of each bridge's op, run 5 times on other inputs,
  every result correct; whether ``command_buffer`` is in the compiled HLO, and,
  where numba-cuda-ffi's probe (``gpu_check_numba_cuda._probe_target``) imports,
  how many runs called a custom call placed after the launches (a run without
  a call replayed the captured graph);
- per-call cost, the variants interleaved round by round in one process:
  1,000 chained tiny launches (256 float32) in one jit for each bridge against
  the same chain of ``jnp`` ops kept apart by ``optimization_barrier`` (goal
  <= 1.5x); where they import, against jax-triton's ``triton_call`` of the same
  Triton kernel and Warp's own JAX bridge (``jax_kernel``) of the same Warp
  kernel (``info``); and a 2**24-element float32 add for each bridge against
  ``jnp`` (goal <= 1.1x).

Each performance goal is reported ``pass`` or ``MISS``; a miss does not fail the
run. Exits 0 when no check failed, 1 when one failed, 2 when there is no GPU.

For this project's tests, the hidden flag ``--emulated`` runs the parts on
ffi-core's emulated GPU on the CPU (each launch executed by Triton's
interpreter, a NumPy stand-in of the CUDA kernel or Warp's CPU build), with
small benchmark sizes: the checks' own logic, not the GPU.
"""

# No ``from __future__ import annotations``: the Warp kernels below are defined
# inside a function, and Warp reads their annotations as objects.

import contextlib
import dataclasses
import functools
import json
import os
import statistics
import subprocess
import sys
import time
import types
from typing import Any

from gpu_check import check, repeat, run_tests, subprocess_env

BRIDGES = ("triton", "cuda-source", "warp")
PARTS = ("tests", "correctness", "graph_check", "benchmark")
TRITON_BLOCK = 256
GRAPH_SIZE = 1024
GRAPH_LOOP = 50
GRAPH_RUNS = 5
GOAL_VS_JNP = 1.5
GOAL_BIG_VS_JNP = 1.1


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The benchmark's sizes: ``chain`` tiny launches of ``size`` float32 in one
    jit; ``big_chain`` adds of ``big`` float32; ``rounds`` interleaved rounds."""

    chain: int = 1000
    size: int = 256
    big: int = 2**24
    big_chain: int = 100
    rounds: int = 15


FULL = Sizes()
#: On the emulated GPU every launch runs on the CPU: a few, to exercise the logic.
EMULATED = Sizes(chain=3, big=2**12, big_chain=2, rounds=1)


def _failure(exc: BaseException) -> str:
    """A failed check's detail: an assertion's message, or the traceback's end."""
    import traceback

    if isinstance(exc, AssertionError) and str(exc).strip():
        return " ".join(str(exc).split())[:1500]
    return "".join(traceback.format_exception(exc))[-2000:]


def _run(name: str, fn: Any) -> bool:
    """One check: ``fn()`` raises on a wrong result, else returns the detail."""
    try:
        detail = fn()
    except Exception as exc:
        return check(name, False, _failure(exc))
    return check(name, True, detail)


# --- the kernels, one set per bridge (built on first use: no GPU needed) --------------


@functools.cache
def triton_kernels() -> types.SimpleNamespace:
    """The Triton kernels of the checks. Pointers (inputs, then outputs), then
    scalars, then constexprs: ``add_one`` has no scalar, so jax-triton's
    ``triton_call`` (arrays and scalars, then outputs) launches it too."""
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x_ptr, out_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = i < N
        tl.store(out_ptr + i, tl.load(x_ptr + i, mask=mask) + 1.0, mask=mask)

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = i < n
        x = tl.load(x_ptr + i, mask=mask)
        tl.store(out_ptr + i, x + tl.load(y_ptr + i, mask=mask), mask=mask)

    @triton.jit
    def axpy(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = i < n
        x = tl.load(x_ptr + i, mask=mask)
        tl.store(out_ptr + i, alpha * x + tl.load(y_ptr + i, mask=mask), mask=mask)

    @triton.jit
    def double_counted(x_ptr, out_ptr, programs_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        i = pid * BLOCK + tl.arange(0, BLOCK)
        mask = i < n
        tl.store(out_ptr + i, 2.0 * tl.load(x_ptr + i, mask=mask), mask=mask)
        tl.store(programs_ptr, tl.num_programs(0), mask=pid == 0)

    return types.SimpleNamespace(add_one=add_one, add=add, axpy=axpy, double_counted=double_counted)


CUDA_SOURCE = r"""
extern "C" __global__ void cu_add_one(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + 1.0f;
}

extern "C" __global__ void cu_add(const float* x, const float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + y[i];
}

extern "C" __global__ void cu_axpy(const float* x, const float* y, float* out, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}

extern "C" __global__ void cu_threads(const float* x, float* out, int* threads, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
    if (i == 0) threads[0] = gridDim.x * blockDim.x;
}
"""
CUDA_KERNELS = {
    "cu_add_one": ["in", "out", "n:int32"],
    "cu_add": ["in", "in", "out", "n:int32"],
    "cu_axpy": ["in", "in", "out", "a:float32", "n:int32"],
    "cu_threads": ["in", "out", "out", "n:int32"],
}


@functools.cache
def cuda_module() -> Any:
    """The CUDA C++ kernels of the checks (one NVRTC module)."""
    from cuda_source_ffi import load_cuda_inline

    return load_cuda_inline(CUDA_SOURCE, kernels=CUDA_KERNELS, name="gpu_check_bridges.cu")


@functools.cache
def warp_kernels() -> types.SimpleNamespace:
    """The Warp kernels of the checks (their array parameters: inputs, then outputs)."""
    from typing import Any

    import warp as wp

    wp.config.log_level = wp.LOG_WARNING

    @wp.kernel
    def add_one(x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
        i = wp.tid()
        out[i] = x[i] + wp.float32(1.0)

    @wp.kernel
    def add(
        x: wp.array(dtype=wp.float32),
        y: wp.array(dtype=wp.float32),
        out: wp.array(dtype=wp.float32),
    ):
        i = wp.tid()
        out[i] = x[i] + y[i]

    @wp.kernel
    def axpy(
        x: wp.array(dtype=wp.float32),
        y: wp.array(dtype=wp.float32),
        alpha: wp.float32,
        out: wp.array(dtype=wp.float32),
    ):
        i = wp.tid()
        out[i] = alpha * x[i] + y[i]

    @wp.kernel
    def scaled_grid(
        x: wp.array2d(dtype=wp.float32), scale: wp.int32, out: wp.array2d(dtype=wp.float32)
    ):
        i, j = wp.tid()
        out[i, j] = x[i, j] * wp.float32(i + 10 * j) * wp.float32(scale)

    @wp.kernel
    def twice_any(x: wp.array(dtype=Any), out: wp.array(dtype=Any)):
        i = wp.tid()
        out[i] = x[i] + x[i]

    @wp.kernel
    def scatter_add(
        index: wp.array(dtype=wp.int32),
        value: wp.array(dtype=wp.float32),
        start: wp.array(dtype=wp.float32),
        out: wp.array(dtype=wp.float32),
    ):
        i = wp.tid()
        wp.atomic_add(out, index[i], value[i])

    @wp.kernel
    def mix(
        x: wp.array(dtype=wp.float64),
        y: wp.array(dtype=wp.float64),
        alpha: wp.float64,
        a: wp.array(dtype=wp.float64),
        b: wp.array(dtype=wp.float64),
    ):
        i = wp.tid()
        a[i] = alpha * x[i] * y[i]
        b[i] = wp.exp(x[i]) - y[i] * y[i]

    return types.SimpleNamespace(
        add_one=add_one,
        add=add,
        axpy=axpy,
        scaled_grid=scaled_grid,
        twice_any=twice_any,
        scatter_add=scatter_add,
        mix=mix,
    )


@functools.cache
def bridge_ops(size: int) -> dict[str, Any]:
    """Each bridge's ``x -> x + 1`` over float32[size], as a function of ``x``."""
    import jax
    import jax.numpy as jnp
    import triton
    from triton_ffi import triton_kernel
    from warp_ffi import warp_kernel

    spec = jax.ShapeDtypeStruct((size,), jnp.float32)
    t = triton_kernel(
        triton_kernels().add_one,
        spec,
        grid=(triton.cdiv(size, TRITON_BLOCK),),
        num_warps=4,
        N=size,
        BLOCK=TRITON_BLOCK,
    )
    c = cuda_module().kernel("cu_add_one", spec, launch_dims=size)
    w = warp_kernel(warp_kernels().add_one, spec)
    return {"triton": t, "cuda-source": lambda x: c(x, n=size), "warp": w}


@functools.cache
def bridge_adds(size: int) -> dict[str, Any]:
    """Each bridge's ``x + y`` over float32[size], as a function of ``(x, y)``."""
    import jax
    import jax.numpy as jnp
    import triton
    from triton_ffi import triton_kernel
    from warp_ffi import warp_kernel

    spec = jax.ShapeDtypeStruct((size,), jnp.float32)
    t = triton_kernel(triton_kernels().add, spec, grid=(triton.cdiv(size, 1024),), BLOCK=1024)
    c = cuda_module().kernel("cu_add", spec, launch_dims=size)
    w = warp_kernel(warp_kernels().add, spec)
    return {
        "triton": lambda x, y: t(x, y, n=size),
        "cuda-source": lambda x, y: c(x, y, n=size),
        "warp": w,
    }


# --- the emulated GPU (--emulated): the checks' logic on the CPU ---------------------


def _cuda_stand_ins() -> list[tuple[str, tuple[int, ...], Any]]:
    """NumPy stand-ins of the CUDA kernels: (entry, parameter sizes, run). Each
    covers only the threads it was launched with, as the kernel would."""
    import numpy as np

    def covered(launch: Any, n: int) -> int:
        return min(n, launch.grid[0] * launch.block[0])

    def add_one(launch: Any) -> None:
        n = int(launch.value(2, "int32"))
        m = covered(launch, n)
        x, out = launch.array(0, np.float32, (n,)), launch.array(1, np.float32, (n,))
        out[:m] = x[:m] + np.float32(1)

    def add(launch: Any) -> None:
        n = int(launch.value(3, "int32"))
        m = covered(launch, n)
        x, y = launch.array(0, np.float32, (n,)), launch.array(1, np.float32, (n,))
        out = launch.array(2, np.float32, (n,))
        out[:m] = x[:m] + y[:m]

    def axpy(launch: Any) -> None:
        n = int(launch.value(4, "int32"))
        m = covered(launch, n)
        x, y = launch.array(0, np.float32, (n,)), launch.array(1, np.float32, (n,))
        out = launch.array(2, np.float32, (n,))
        out[:m] = launch.value(3, "float32") * x[:m] + y[:m]

    def threads(launch: Any) -> None:
        n = int(launch.value(3, "int32"))
        m = covered(launch, n)
        x, out = launch.array(0, np.float32, (n,)), launch.array(1, np.float32, (n,))
        out[:m] = np.float32(2) * x[:m]
        launch.array(2, np.int32, (1,))[0] = launch.grid[0] * launch.block[0]

    return [
        ("cu_add_one", (8, 8, 4), add_one),
        ("cu_add", (8, 8, 8, 4), add),
        ("cu_axpy", (8, 8, 8, 4, 4), axpy),
        ("cu_threads", (8, 8, 8, 4), threads),
    ]


@functools.cache
def _emulated_gpu() -> Any:
    """One emulated GPU per process (a registered target keeps the handler built
    against the emulated driver it was first lowered with), with two devices."""
    from ffi_core.bridge.cuda.testing import EmulatedGPU
    from triton_ffi.testing import interpreted
    from warp_ffi.testing import on_cpu

    gpu = on_cpu(interpreted(EmulatedGPU(compute_capability=(9, 0), devices=2)))
    for entry, sizes, run in _cuda_stand_ins():
        gpu.define(entry, sizes, run)
    return gpu


@contextlib.contextmanager
def _placement(emulated: bool):
    """Nothing on a GPU; with ``emulated``, the launcher's and Warp's CUDA
    lowerings run on the CPU against the emulated GPU, which is yielded."""
    if not emulated:
        yield None
        return
    from ffi_core.bridge.cuda import cuda_launch_cpu_lowering, cuda_launch_lowering, cuda_launch_p
    from ffi_core.bridge.cuda.testing import emulate
    from warp_ffi.testing import LOWERING as WARP_LOWERING

    launcher = (cuda_launch_p, cuda_launch_lowering, cuda_launch_cpu_lowering)
    with emulate(_emulated_gpu(), [launcher, WARP_LOWERING]) as gpu:
        yield gpu


def _devices(emulated: bool) -> list[Any]:
    """The GPUs JAX sees (the CPU devices standing in for them when emulated)."""
    import jax

    if emulated:
        return list(jax.devices("cpu"))
    return [d for d in jax.devices() if d.platform in ("gpu", "cuda")]


# --- correctness ----------------------------------------------------------------------


def _rand(*shape: int, seed: int = 0, dtype: Any = "float32") -> Any:
    import numpy as np

    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _close(got: Any, want: Any, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    import numpy as np

    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol)


def _equal(got: Any, want: Any) -> None:
    import numpy as np

    np.testing.assert_array_equal(np.asarray(got), want)


def _common_checks(bridge: str, add: Any, how: str) -> list[tuple[str, Any]]:
    """vmap, scan and aliases of a bridge, given ``add(n, aliased)``: its op
    ``(x, y) -> x + y`` over float32[n]; with ``aliased``, its output is
    aliased to an input as ``how`` says."""
    import jax
    import jax.numpy as jnp

    def vmap() -> str:
        n = 1000
        op = add(n, False)
        x, y = _rand(3, n), _rand(n, seed=1)
        _equal(jax.vmap(lambda a: op(a, y))(x), x + y)
        xs, ys = _rand(4, n, seed=2), _rand(4, n, seed=3)
        _equal(jax.jit(jax.vmap(op))(xs, ys), xs + ys)
        return (
            f"x + y over {n} float32, vmapped over x (3 rows; y unbatched) and over both "
            "(4 rows, under jit), default vmap_method: equal to NumPy"
        )

    def scan() -> str:
        n = 700
        op = add(n, False)
        x, y = _rand(n), _rand(n, seed=1)

        def step(carry: Any, _: Any) -> tuple[Any, None]:
            return op(carry, y), None

        out, _ = jax.lax.scan(step, jnp.asarray(x), None, length=4)
        want = x
        for _ in range(4):
            want = want + y
        _equal(out, want)
        return f"4 steps of lax.scan of x + y over {n} float32: equal to NumPy"

    def aliases() -> str:
        n = 513
        op = add(n, True)
        x, y = _rand(n), _rand(n, seed=1)
        _equal(jax.jit(op)(x, y), x + y)
        _equal(jax.jit(op, donate_argnums=0)(jnp.asarray(x), y), x + y)
        return (
            f"x + y over {n} float32 through {how}, under jit, with and without x "
            "donated: equal to NumPy"
        )

    return [(f"{bridge}: vmap", vmap), (f"{bridge}: scan", scan), (f"{bridge}: aliases", aliases)]


def _triton_checks() -> list[tuple[str, Any]]:
    import jax
    import jax.numpy as jnp

    S = jax.ShapeDtypeStruct

    def scalar() -> str:
        import triton
        from triton_ffi import triton_kernel

        n = 3000
        op = triton_kernel(
            triton_kernels().axpy, S((n,), jnp.float32), grid=(triton.cdiv(n, 1024),), BLOCK=1024
        )
        x, y = _rand(n), _rand(n, seed=1)
        for alpha in (0.5, -2.0):
            _close(
                jax.jit(lambda a, b, alpha=alpha: op(a, b, alpha=alpha, n=n))(x, y), alpha * x + y
            )
        return f"alpha * x + y over {n} float32 under jit, alpha 0.5 and -2.0 (attributes)"

    def grid() -> str:
        import triton
        from triton_ffi import triton_kernel

        size, block = 4096, 256
        op = triton_kernel(
            triton_kernels().double_counted,
            (S((size,), jnp.float32), S((1,), jnp.int32)),
            grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
            BLOCK=block,
        )
        x = _rand(size)
        seen = []
        for n in (100, 3000):
            out, programs = jax.jit(lambda a, n=n: op(a, n=n))(x)
            _equal(out[:n], 2 * x[:n])
            seen.append(int(programs[0]))
            assert seen[-1] == -(-n // block), (
                f"n={n}: the kernel saw {seen[-1]} programs, the grid callable gave "
                f"{-(-n // block)}"
            )
        return (
            "grid=lambda meta: (cdiv(meta['n'], meta['BLOCK']),) with n 100 and 3000: "
            f"tl.num_programs(0) in the kernel {seen}, 2 * x equal to NumPy"
        )

    def add(n: int, aliased: bool) -> Any:
        import triton
        from triton_ffi import triton_kernel

        op = triton_kernel(
            triton_kernels().add,
            S((n,), jnp.float32),
            grid=(triton.cdiv(n, 128),),
            BLOCK=128,
            input_output_aliases={0: 0} if aliased else None,
        )
        return lambda x, y: op(x, y, n=n)

    return [
        ("triton: jit, scalar parameter", scalar),
        ("triton: grid callable", grid),
        *_common_checks("triton", add, "input_output_aliases={0: 0}"),
    ]


def _cuda_source_checks() -> list[tuple[str, Any]]:
    import jax
    import jax.numpy as jnp

    S = jax.ShapeDtypeStruct

    def scalar() -> str:
        n = 3000
        op = cuda_module().kernel("cu_axpy", S((n,), jnp.float32), launch_dims=n)
        x, y = _rand(n), _rand(n, seed=1)
        for a in (0.5, -2.0):
            _close(jax.jit(lambda u, v, a=a: op(u, v, a=a, n=n))(x, y), a * x + y)
        return f"a * x + y over {n} float32 under jit, a 0.5 and -2.0 (attributes)"

    def launch_dims() -> str:
        size, per_block = 4096, 128
        op = cuda_module().kernel(
            "cu_threads",
            (S((size,), jnp.float32), S((1,), jnp.int32)),
            launch_dims=lambda scalars: scalars["n"],
            threads_per_block=per_block,
        )
        x = _rand(size)
        seen = []
        for n in (100, 3000):
            out, threads = jax.jit(lambda a, n=n: op(a, n=n))(x)
            _equal(out[:n], 2 * x[:n])
            seen.append(int(threads[0]))
            want = -(-n // per_block) * per_block
            assert seen[-1] == want, (
                f"n={n}: launched with {seen[-1]} threads, the launch_dims callable "
                f"asked for {n} ({want} in blocks of {per_block})"
            )
        return (
            "launch_dims=lambda scalars: scalars['n'] with n 100 and 3000: gridDim.x * "
            f"blockDim.x in the kernel {seen}, 2 * x equal to NumPy"
        )

    def add(n: int, aliased: bool) -> Any:
        op = cuda_module().kernel(
            "cu_add",
            S((n,), jnp.float32),
            launch_dims=n,
            input_output_aliases={0: 0} if aliased else None,
        )
        return lambda x, y: op(x, y, n=n)

    return [
        ("cuda-source: jit, scalar parameters", scalar),
        ("cuda-source: launch_dims callable", launch_dims),
        *_common_checks("cuda-source", add, "input_output_aliases={0: 0}"),
    ]


def _warp_checks() -> list[tuple[str, Any]]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    S = jax.ShapeDtypeStruct

    def scalar() -> str:
        from warp_ffi import warp_kernel

        n = 3000
        op = warp_kernel(warp_kernels().axpy, S((n,), jnp.float32))
        x, y = _rand(n), _rand(n, seed=1)
        for alpha in (0.5, -2.0):
            _close(jax.jit(lambda a, b, alpha=alpha: op(a, b, alpha=alpha))(x, y), alpha * x + y)
        return f"alpha * x + y over {n} float32 under jit, alpha 0.5 and -2.0 (attributes)"

    def grid_2d() -> str:
        from warp_ffi import warp_kernel

        shape = (33, 70)
        op = warp_kernel(warp_kernels().scaled_grid, S(shape, jnp.float32))
        x = _rand(*shape)
        i, j = np.indices(shape)
        want = x * (i + 10 * j).astype(np.float32) * np.float32(-3)
        _close(jax.jit(lambda a: op(a, scale=-3))(x), want, rtol=1e-6, atol=0)
        return f"out[i, j] = x[i, j] * (i + 10 j) * scale over {shape}, wp.tid() in 2-d"

    def generic() -> str:
        from warp_ffi import warp_kernel

        kernel = warp_kernels().twice_any
        f32 = warp_kernel(kernel, S((300,), jnp.float32))
        i32 = warp_kernel(kernel, S((300,), jnp.int32))
        a, b = _rand(300), np.arange(-150, 150, dtype=np.int32)
        _equal(jax.jit(f32)(a), a + a)
        _equal(jax.jit(i32)(b), b + b)
        return "a wp.array(dtype=Any) kernel specialized for float32 and int32: equal to NumPy"

    def add(n: int, aliased: bool) -> Any:
        from warp_ffi import warp_kernel

        if not aliased:
            return warp_kernel(warp_kernels().add, S((n,), jnp.float32))
        # Warp's aliases: the output starts as the aliased input (a scatter-add).
        op = warp_kernel(
            warp_kernels().scatter_add,
            S((n,), jnp.float32),
            launch_dims=n,
            input_output_aliases={2: 0},
        )
        index = np.arange(n, dtype=np.int32)
        return lambda x, y: op(index, y, x)

    def grad() -> str:
        from warp_ffi import warp_kernel

        with jax.enable_x64(True):
            op = warp_kernel(warp_kernels().mix, (S((7,), jnp.float64), S((7,), jnp.float64)))
            x, y = _rand(7, dtype="float64"), _rand(7, seed=1, dtype="float64")

            def loss(x: Any, y: Any) -> Any:
                a, b = op(x, y, alpha=1.5)
                return jnp.sum(a * jnp.cos(b))

            def reference(x: Any, y: Any) -> Any:
                return jnp.sum(1.5 * x * y * jnp.cos(jnp.exp(x) - y * y))

            want = jax.grad(reference, (0, 1))(x, y)
            for got in (jax.grad(loss, (0, 1))(x, y), jax.jit(jax.grad(loss, (0, 1)))(x, y)):
                for g, w in zip(got, want, strict=True):
                    _close(g, np.asarray(w), rtol=1e-10, atol=1e-12)
        return (
            "jax.grad of sum(a * cos(b)), (a, b) = (alpha x y, exp(x) - y^2) from Warp's "
            "adjoint kernel, eagerly and under jit, float64: equal to jnp's to 1e-10"
        )

    def finite_differences() -> str:
        from jax.test_util import check_grads
        from warp_ffi import warp_kernel

        with jax.enable_x64(True):
            op = warp_kernel(warp_kernels().mix, (S((7,), jnp.float64), S((7,), jnp.float64)))
            x, y = _rand(7, seed=2, dtype="float64"), _rand(7, seed=3, dtype="float64")
            check_grads(lambda x, y: op(x, y, alpha=1.5), (x, y), order=1, modes=["rev"])
        return "jax.test_util.check_grads, order 1, reverse mode, float64: within tolerance"

    return [
        ("warp: jit, scalar parameter", scalar),
        ("warp: 2-d launch", grid_2d),
        ("warp: generic (Any) kernel", generic),
        *_common_checks(
            "warp", add, "a scatter-add into its start value, input_output_aliases={2: 0}"
        ),
        ("warp: grad vs jnp (float64)", grad),
        ("warp: check_grads (float64)", finite_differences),
    ]


def _device_checks(devices: list[Any], gpu: Any) -> bool:
    """A call placed on device 1 runs there, then one on device 0, per bridge."""
    if len(devices) < 2:
        return check(
            "device 1",
            None,
            f"{len(devices)} GPU visible: the check that a call placed on device 1 runs "
            "there needs two or more",
        )
    import jax
    import numpy as np

    ok = True
    for bridge in BRIDGES:

        def placed(bridge: str = bridge) -> str:
            f = jax.jit(bridge_ops(GRAPH_SIZE)[bridge])
            x = np.arange(GRAPH_SIZE, dtype=np.float32)
            for index in (1, 0):
                device = devices[index]
                out = f(jax.device_put(x, device))
                assert out.devices() == {device}, (
                    f"placed on {device}, the result is on {out.devices()}"
                )
                _equal(out, x + 1)
                if gpu is not None:
                    assert gpu.launched_on[-1] == index, (
                        f"placed on device {index}, launched on {gpu.launched_on[-1]}"
                    )
            return f"x + 1 placed on {devices[1]} ran there (result there, correct), then on {devices[0]}"

        ok &= _run(f"device 1: {bridge}", placed)
    return ok


def correctness(emulated: bool = False) -> bool:
    ok = True
    with _placement(emulated) as gpu:
        for name, fn in (*_triton_checks(), *_cuda_source_checks(), *_warp_checks()):
            ok &= _run(name, fn)
        ok &= _device_checks(_devices(emulated), gpu)
    return ok


# --- command buffers --------------------------------------------------------------------


_GRAPH_CHECK = """
import json, sys
sys.path.insert(0, {tools!r})
from gpu_check_bridges import _graph_loops
print("RESULT " + json.dumps(_graph_loops({emulated!r})))
"""


def _probe(emulated: bool) -> tuple[Any, list[Any], str | None]:
    """numba-cuda-ffi's probe (a custom call recording each call XLA makes) as
    an op, its record, and why it is missing where it is."""
    if emulated:
        return None, [], "not on the emulated GPU"
    try:
        import ffi_core
        import jax
        import jax.numpy as jnp
        from gpu_check_numba_cuda import _probe_target

        record: list[Any] = []
        name = _probe_target(
            record, traits=ffi_core.abi.HandlerTraits.COMMAND_BUFFER_COMPATIBLE, temporary=False
        )
        op = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((GRAPH_SIZE,), jnp.float32))
        return op, record, None
    except Exception as exc:
        return None, [], f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"


def _graph_loops(emulated: bool = False) -> dict[str, Any]:
    """In a process started with the command-buffer flags: for each bridge, a
    jitted loop of GRAPH_LOOP launches (then the probe, where there is one),
    run GRAPH_RUNS times on other inputs."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    probe, record, missing = _probe(emulated)
    result: dict[str, Any] = {"probe": missing, "bridges": {}}
    with _placement(emulated):
        for bridge in BRIDGES:
            seen: dict[str, Any] = {"error": None, "command_buffer_in_hlo": None}
            result["bridges"][bridge] = seen
            try:
                op = bridge_ops(GRAPH_SIZE)[bridge]

                @jax.jit
                def loop(x: Any, op: Any = op) -> Any:
                    for _ in range(GRAPH_LOOP):
                        x = op(x)
                    return x if probe is None else probe(x)

                hlo = loop.lower(jnp.zeros(GRAPH_SIZE, jnp.float32)).compile().as_text()
                seen["command_buffer_in_hlo"] = "command_buffer" in hlo
                record.clear()
                calls = []
                for step in range(GRAPH_RUNS):
                    out = loop(jnp.full(GRAPH_SIZE, step, jnp.float32))
                    want = np.full(GRAPH_SIZE, step + GRAPH_LOOP, np.float32)
                    np.testing.assert_array_equal(np.asarray(out), want)
                    calls.append(len(record))
                seen["probe_calls_after_each_run"] = calls if probe is not None else None
            except Exception as exc:
                seen["error"] = f"{type(exc).__name__}: " + " ".join(str(exc).split())[:600]
    return result


def graph_check(emulated: bool = False) -> bool:
    env = subprocess_env()
    flags = env.get("XLA_FLAGS", "")
    env["XLA_FLAGS"] = (
        f"{flags} --xla_gpu_enable_command_buffer=CUSTOM_CALL,FUSION "
        "--xla_gpu_graph_min_graph_size=1"
    ).strip()
    source = _GRAPH_CHECK.format(
        tools=os.path.dirname(os.path.abspath(__file__)), emulated=emulated
    )
    proc = subprocess.run(
        [sys.executable, "-c", source],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        return check("command buffer", False, (proc.stdout + proc.stderr)[-2000:])
    result = json.loads(lines[-1][len("RESULT ") :])
    ok = True
    for bridge, seen in result["bridges"].items():
        calls = seen.get("probe_calls_after_each_run")
        if calls is None:
            replay = f"probe not used ({result['probe']})"
        else:
            replay = (
                f"calls of a custom call after the launches, counted after each run: {calls} "
                "(runs without a call replayed the captured graph)"
            )
        ok &= check(
            f"command buffer: {bridge}",
            seen["error"] is None,
            f"{GRAPH_RUNS} runs of a jitted loop of {GRAPH_LOOP} launches, each on other "
            f"inputs: {'all correct' if seen['error'] is None else seen['error']}; "
            f"'command_buffer' in the compiled HLO text: {seen['command_buffer_in_hlo']}; "
            + replay,
        )
    return ok


# --- per-call cost ----------------------------------------------------------------------


def _warp_jax_kernel() -> tuple[Any, str]:
    """Warp's own JAX bridge, wherever this version of Warp has it."""
    import warp

    if hasattr(warp, "jax_kernel"):
        return warp.jax_kernel, "warp.jax_kernel"
    try:
        from warp.jax_experimental.ffi import jax_kernel

        return jax_kernel, "warp.jax_experimental.ffi.jax_kernel"
    except ImportError:
        from warp.jax_experimental import jax_kernel

        return jax_kernel, "warp.jax_experimental.jax_kernel"


def _foreign_steps(sizes: Sizes) -> dict[str, tuple[str, Any]]:
    """Other projects' bridges launching the same tiny kernels: name -> (the
    bridge of ours it compares with, a maker of the step ``x -> x + 1``)."""
    import jax
    import jax.numpy as jnp

    spec = jax.ShapeDtypeStruct((sizes.size,), jnp.float32)

    def jax_triton() -> Any:
        import jax_triton as jt
        import triton

        kernel = triton_kernels().add_one
        grid = (triton.cdiv(sizes.size, TRITON_BLOCK),)

        def step(x: Any) -> Any:
            return jt.triton_call(
                x,
                kernel=kernel,
                out_shape=spec,
                grid=grid,
                num_warps=4,
                N=sizes.size,
                BLOCK=TRITON_BLOCK,
            )

        return step

    def warp_own() -> Any:
        jax_kernel, _ = _warp_jax_kernel()
        op = jax_kernel(warp_kernels().add_one)

        def step(x: Any) -> Any:
            out = op(x)
            return out[0] if isinstance(out, list | tuple) else out

        return step

    try:
        warp_name = _warp_jax_kernel()[1]
    except ImportError:
        warp_name = "warp jax_kernel"
    return {
        "tiny jax_triton.triton_call": ("triton", jax_triton),
        f"tiny {warp_name}": ("warp", warp_own),
    }


def benchmark(emulated: bool = False) -> bool:
    with _placement(emulated):
        return _benchmark(EMULATED if emulated else FULL, emulated)


def _benchmark(sizes: Sizes, emulated: bool) -> bool:
    import jax
    import jax.numpy as jnp
    import numpy as np

    def chain(step: Any, n: int) -> Any:
        return jax.jit(lambda x, *rest: repeat(step, x, rest, n))

    big = f"2^{sizes.big.bit_length() - 1}"
    variants: dict[str, tuple[Any, int, str]] = {}
    for bridge, op in bridge_ops(sizes.size).items():
        variants[f"tiny {bridge}"] = (chain(op, sizes.chain), sizes.chain, "tiny")
    variants["tiny jnp+barrier"] = (
        chain(lambda x: jax.lax.optimization_barrier(x + 1), sizes.chain),
        sizes.chain,
        "tiny",
    )
    foreign = {}
    for name, (ours, make) in _foreign_steps(sizes).items():
        try:
            variants[name] = (chain(make(), sizes.chain), sizes.chain, "tiny")
            foreign[name] = ours
        except Exception as exc:
            check(f"per call: {name}", None, f"not measured: {type(exc).__name__}: {exc}"[:500])
    for bridge, op in bridge_adds(sizes.big).items():
        variants[f"{big} {bridge}"] = (chain(op, sizes.big_chain), sizes.big_chain, "big")
    variants[f"{big} jnp+barrier"] = (
        chain(lambda x, y: jax.lax.optimization_barrier(x + y), sizes.big_chain),
        sizes.big_chain,
        "big",
    )
    inputs = {
        "tiny": (jnp.zeros((sizes.size,), jnp.float32),),
        "big": (jnp.zeros((sizes.big,), jnp.float32), jnp.ones((sizes.big,), jnp.float32)),
    }
    # Results first: a timing of a wrong result means nothing (every sum here is exact).
    expected = {
        "tiny": np.full(sizes.size, sizes.chain, np.float32),
        "big": np.full(sizes.big, sizes.big_chain, np.float32),
    }
    ok = True
    for name, (fn, _, kind) in list(variants.items()):
        try:
            out = np.asarray(fn(*inputs[kind]))
            wrong = None if np.array_equal(out, expected[kind]) else f"got {out[:4]}..."
        except Exception as exc:
            wrong = f"{type(exc).__name__}: " + " ".join(str(exc).split())[:400]
        if wrong is None:
            continue
        del variants[name]
        if name in foreign:
            check(f"per call: {name}", None, f"not measured: {wrong}")
            del foreign[name]
        else:
            ok &= check(f"result {name}", False, f"{wrong}, expected {expected[kind][:4]}...")
    times: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(sizes.rounds):
        order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
        for name in order:
            fn, n, kind = variants[name]
            start = time.perf_counter()
            fn(*inputs[kind]).block_until_ready()
            times[name].append((time.perf_counter() - start) / n)
    per_call = {name: statistics.median(t) for name, t in times.items()}
    for name, seconds in per_call.items():
        check(f"per call: {name}", None, f"{seconds * 1e6:.2f} us (median of {sizes.rounds})")
    note = " (emulated GPU: not a GPU timing)" if emulated else ""

    def goal(name: str, ratio: float, limit: float, detail: str) -> bool:
        if emulated:
            return check(name, None, detail + note)
        return check(name, ratio <= limit, detail, goal=True)

    for kind, label, limit in (
        ("tiny", "tiny launches", GOAL_VS_JNP),
        (big, f"{big} add", GOAL_BIG_VS_JNP),
    ):
        for bridge in BRIDGES:
            mine, theirs = f"{kind} {bridge}", f"{kind} jnp+barrier"
            if mine in per_call and theirs in per_call:
                ratio = per_call[mine] / per_call[theirs]
                ok &= goal(
                    f"{label} vs jnp: {bridge}", ratio, limit, f"{ratio:.3f}x (goal <= {limit}x)"
                )
    for name, ours in foreign.items():
        mine = f"tiny {ours}"
        if mine in per_call and name in per_call:
            ratio = per_call[mine] / per_call[name]
            check(
                f"tiny {ours} vs {name.removeprefix('tiny ')}",
                None,
                f"{ratio:.3f}x: {per_call[mine] * 1e6:.2f} us against "
                f"{per_call[name] * 1e6:.2f} us per call, the same kernel{note}",
            )
    return ok


# --- the packages' tests, and main ---------------------------------------------------


def tests(emulated: bool = False) -> bool:
    del emulated  # the tests choose their own device
    paths = ["packages/triton-ffi", "packages/cuda-source-ffi", "packages/warp-ffi"]
    return run_tests(paths, timeout=3600)


def _versions(gpus: list[Any], emulated: bool) -> str:
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    if emulated:
        where = "emulated GPU (ffi-core's EmulatedGPU on the CPU)"
    else:
        kinds = sorted({d.device_kind for d in gpus})
        where = f"{len(gpus)} GPU(s): {', '.join(kinds)}"
    names = ("jax", "jaxlib", "numpy", "triton", "warp-lang", "jax-triton", "numba")
    packages = ", ".join(f"{n} {of(n)}" for n in names)
    try:
        from cuda_source_ffi import nvrtc_version

        nvrtc = ".".join(map(str, nvrtc_version()))
    except Exception as exc:
        nvrtc = f"unavailable ({type(exc).__name__})"
    return f"{where}; python {sys.version.split()[0]}, {packages}, NVRTC {nvrtc}"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        action="append",
        choices=PARTS,
        help="run only these parts (repeatable); all by default",
    )
    parser.add_argument("--emulated", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    only = set(args.only or ())
    import jax

    if args.emulated:  # two CPU devices stand in for two GPUs (before JAX starts)
        jax.config.update("jax_num_cpu_devices", 2)
    gpus = _devices(False)
    if not gpus and not args.emulated:
        check("GPU", None, "no GPU visible to JAX: nothing to check")
        return 2
    check("versions", None, _versions(gpus, args.emulated))
    ok = True
    for part in (tests, correctness, graph_check, benchmark):
        if only and part.__name__ not in only:
            continue
        try:
            ok &= part(args.emulated)
        except Exception as exc:  # one broken part must not hide the others
            import traceback

            ok &= check(part.__name__, False, "".join(traceback.format_exception(exc))[-2000:])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
