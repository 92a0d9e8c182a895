"""Tutorial 7: GPU kernels from Triton, CUDA C++, Pallas and Warp, and what of
each runs on a machine without a GPU.

Run it: ``uv run python docs/gpu_kernels.py``. Every step asserts its result,
so this file doubles as a test (CI runs it).

``triton_kernel`` (triton-ffi) and ``load_cuda_inline`` (cuda-source-ffi) turn
a ``@triton.jit`` kernel or CUDA C++ source into a function on JAX arrays that
XLA launches natively on its stream, with no Python per call. Launching needs
an NVIDIA GPU, but much does not: compiling to PTX and cubin for an explicit
architecture, checking the kernel's parameter list, running a Triton kernel in
Triton's interpreter, and running the whole operation under ``jax.jit`` on an
emulated GPU. Pallas kernels join an ``XLACustomKernel`` as a backend that a
CPU runs in interpret mode. A Warp kernel wrapped with ``warp_kernel`` runs on
either: Warp's CPU build on the CPU, its CUDA build through the same launcher
on a GPU. Where JAX sees a CUDA device, the steps below run the kernels for
real instead.
"""

import functools

import jax
import jax.numpy as jnp
import numba
import numpy as np
import triton
import triton.language as tl
import warp as wp
import xla_custom_kernel as xck
from cuda_source_ffi import NvrtcCompileError, entry_params, load_cuda_inline
from ffi_core.bridge.cuda import ptx_params
from ffi_core.bridge.cuda.testing import EmulatedGPU, emulate
from jax.experimental import pallas as pl
from triton_ffi import compile_triton, run_interpreted, triton_kernel
from triton_ffi.testing import LOWERING, interpreted
from warp_ffi import warp_kernel
from warp_ffi.testing import LOWERING as WARP_LOWERING
from warp_ffi.testing import on_cpu
from xla_custom_kernel.testing import check_kernel

S = jax.ShapeDtypeStruct
ON_GPU = jax.devices()[0].platform == "gpu"
NO_GPU = "runs on NVIDIA GPUs, but JAX has no CUDA device here"
CPU = jax.devices("cpu")[0]
# check_kernel (Tutorial 8) checks each op below; its export row runs a fresh
# process importing the modules that define the kernels, and this file runs
# as __main__, which no other process can import.
SKIP = {"export": "the tutorial runs as __main__, which a fresh process cannot import"}
# Small samples keep the checks fast.
X8 = np.linspace(-1.0, 1.0, 8, dtype=np.float32)
Y8 = np.linspace(0.5, 2.0, 8, dtype=np.float32)

# --- 1. A Triton kernel as a JAX operation ------------------------------------
# The parameters that are not tl.constexpr are one pointer per input, one per
# output, then scalars. Constexprs are fixed when the kernel is wrapped;
# scalars are static keywords of each call (attributes of the FFI call, so
# every value shares one compiled kernel). `grid` may be a callable of the
# meta-parameters (the constexprs and the call's scalars), as in Triton.


@triton.jit
def axpy(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask)
    tl.store(out_ptr + i, alpha * x + tl.load(y_ptr + i, mask=mask), mask=mask)


n = 1000
rng = np.random.default_rng(0)
x = rng.standard_normal(n).astype(np.float32)
y = rng.standard_normal(n).astype(np.float32)
axpy_op = triton_kernel(
    axpy,
    S((n,), jnp.float32),
    grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
    num_warps=4,  # the block: 32 * num_warps threads
    BLOCK=256,
)
# Mistakes are caught when the op is made or called, before any GPU is needed.
try:
    triton_kernel(axpy, S((n,), jnp.float32), grid=4)
    raise AssertionError("a missing constexpr should be refused")
except TypeError as e:
    assert "missing the value of tl.constexpr parameter(s) ['BLOCK']" in str(e)
try:
    axpy_op(x, y, n=n)
    raise AssertionError("a missing scalar should be refused")
except TypeError as e:
    assert "missing scalar parameter(s) ['alpha']" in str(e)

# --- 2. Compiling for a GPU, without one ---------------------------------------
# Triton's compiler runs on the host and bundles ptxas, so compile_triton
# builds PTX and a cubin for any architecture you name. The signature gives a
# dtype per parameter that is not tl.constexpr ('*' for a pointer).
signature = {
    "x_ptr": "*float32",
    "y_ptr": "*float32",
    "out_ptr": "*float32",
    "alpha": "float32",
    "n": "int32",
}
for cc, target in [((8, 0), "sm_80"), ((9, 0), "sm_90a")]:  # A100; H100 (as sm_90a)
    compiled = compile_triton(axpy, signature, {"BLOCK": 256}, cc=cc, num_warps=4)
    assert f".target {target}" in compiled.ptx
    assert compiled.cubin.startswith(b"\x7fELF")  # what the driver would load
    assert compiled.entry == "axpy" and compiled.block == (128, 1, 1)
# The compiled entry's parameters, in order: BLOCK is compiled in, and Triton
# appends two scratch pointers, which the launcher passes as null.
params = [(p.name, p.kind, p.dtype, p.size) for p in compiled.params]
assert params == [
    ("x_ptr", "pointer", "float32", 8),
    ("y_ptr", "pointer", "float32", 8),
    ("out_ptr", "pointer", "float32", 8),
    ("alpha", "scalar", "float32", 4),
    ("n", "scalar", "int32", 4),
    ("global_scratch", "scratch", "", 8),
    ("profile_scratch", "scratch", "", 8),
]
# The launcher packs exactly these sizes; they are checked against the PTX.
assert ptx_params(compiled.ptx, compiled.entry) == compiled.param_sizes == (8, 8, 8, 4, 4, 8, 8)

# --- 3. The same kernel in Triton's interpreter, on NumPy arrays ---------------
# run_interpreted runs the @triton.jit function program by program on host
# arrays (pointers are the arrays' memory, outputs are written in place): a
# CPU reference for the kernel itself. Arguments: every parameter that is not
# tl.constexpr, in order; then the constexprs.
out = np.zeros(n, np.float32)
run_interpreted(axpy, (triton.cdiv(n, 256),), [x, y, out, 0.5, n], {"BLOCK": 256})
np.testing.assert_allclose(out, 0.5 * x + y, rtol=1e-6)

# --- 4. Calling the operation: a GPU, or an emulated one -----------------------
if ON_GPU:
    # Compiled for this GPU's architecture at lowering, launched by XLA.
    got = jax.jit(lambda x, y: axpy_op(x, y, alpha=0.5, n=n))(x, y)
    np.testing.assert_allclose(got, 0.5 * x + y, rtol=1e-6)
    xs = np.stack([x, 2 * x, 3 * x])
    got = jax.jit(jax.vmap(lambda x: axpy_op(x, y, alpha=2.0, n=n)))(xs)
    np.testing.assert_allclose(got, 2 * xs + y, rtol=1e-6)
else:
    # On CPU arrays the call says what it needs.
    try:
        jax.jit(lambda x, y: axpy_op(x, y, alpha=0.5, n=n))(x, y)
        raise AssertionError("a GPU op should not run without a GPU")
    except RuntimeError as e:
        assert f"triton kernel 'axpy' {NO_GPU}" in str(e)
    # The package's tests run the operation end to end on ffi-core's emulated
    # GPU: the real lowering, the real compile (for the emulated sm_90), the
    # real native handler called by XLA with its checks and parameter packing;
    # only the launch is different: Triton's interpreter runs the kernel on the
    # pointers and scalars the handler packed. It is a test harness (one
    # EmulatedGPU per process; it sits in for the driver while inside
    # `emulate`), not a way to run GPU code fast.
    gpu = interpreted(EmulatedGPU(compute_capability=(9, 0)))
    with emulate(gpu, [LOWERING]):
        got = jax.jit(lambda x, y: axpy_op(x, y, alpha=0.5, n=n))(x, y)
        np.testing.assert_allclose(got, 0.5 * x + y, rtol=1e-6)
        grid, block, shared_mem, _ = gpu.launches[-1]
        assert grid == (4, 1, 1) and block == (128, 1, 1) and shared_mem == 0
        # Another alpha is an attribute of the call: no new compile or load.
        got = jax.jit(lambda x, y: axpy_op(x, y, alpha=-2.0, n=n))(x, y)
        np.testing.assert_allclose(got, -2.0 * x + y, rtol=1e-6)
        assert [entry for _, entry, *_ in gpu.loaded] == ["axpy"]
        # vmap: one native call, launching the kernel once per batch element.
        gpu.clear()
        xs = np.stack([x, 2 * x, 3 * x])
        got = jax.jit(jax.vmap(lambda x: axpy_op(x, y, alpha=2.0, n=n)))(xs)
        np.testing.assert_allclose(got, 2 * xs + y, rtol=1e-6)
        assert len(gpu.launches) == 3

# --- 5. CUDA C++ source, compiled by NVRTC ------------------------------------
# Each kernel's parameters are declared in order: "in" (the next input's
# pointer), "out" (the next output's), "name:dtype" (a scalar keyword of the
# call). C++ kernels are named as C++ does, template instances included.
SOURCE = r"""
extern "C" __global__ void saxpy(const float* x, const float* y, float* out, float alpha, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = alpha * x[i] + y[i];
}

template <typename T>
__global__ void clip(const T* x, T* out, T lo, T hi, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] < lo ? lo : (x[i] > hi ? hi : x[i]);
}
"""
module = load_cuda_inline(
    SOURCE,
    kernels={
        "saxpy": ["in", "in", "out", "alpha:float32", "n:int32"],
        "clip<float>": ["in", "out", "lo:float32", "hi:float32", "n:int32"],
    },
    name="kernels.cu",
)
# NVRTC runs on the host: PTX and cubin for an explicit architecture.
built = module.compile((8, 0))
assert ".target sm_80" in built.ptx and built.cubin.startswith(b"\x7fELF")
assert built.entries["saxpy"] == "saxpy"  # extern "C": the name as written
assert built.entries["clip<float>"].startswith("_Z4clipIfE")  # C++: the mangled entry
# The declared layouts, checked against the compiled entries before a launch.
assert entry_params(built, "saxpy") == (8, 8, 8, 4, 4)
assert entry_params(built, "clip<float>") == (8, 8, 4, 4, 4)

# --- 6. A source that does not compile ----------------------------------------
# NvrtcCompileError names the source and the architecture, then gives NVRTC's
# log with file name and line number (also kept as `.log`).
broken = load_cuda_inline(
    'extern "C" __global__ void twice(const float* x, float* out, int n) {\n'
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n) out[i] = 2 * x[i] + offset;\n"
    "}\n",
    kernels={"twice": ["in", "out", "n:int32"]},
    name="twice.cu",
)
try:
    broken.compile((8, 0))
    raise AssertionError("the source should not compile")
except NvrtcCompileError as e:
    assert str(e).startswith("NVRTC could not compile 'twice.cu' for sm_80:")
    assert 'twice.cu(3): error: identifier "offset" is undefined' in e.log

# --- 7. Calling the CUDA operation -----------------------------------------------
# Give the launch as `launch_dims` (total threads; blocks of threads_per_block)
# or as `grid` and `block`. The kernel checks its own bounds.
saxpy_op = module.kernel("saxpy", S((n,), jnp.float32), launch_dims=n, threads_per_block=256)
clip_op = module.kernel("clip<float>", S((n,), jnp.float32), grid=4, block=256)
if ON_GPU:
    got = jax.jit(lambda x, y: saxpy_op(x, y, alpha=0.5, n=n))(x, y)
    np.testing.assert_allclose(got, 0.5 * x + y, rtol=1e-6)
    np.testing.assert_array_equal(clip_op(x, lo=-1.0, hi=1.0, n=n), np.clip(x, -1.0, 1.0))
else:
    try:
        saxpy_op(x, y, alpha=0.5, n=n)
        raise AssertionError("a GPU op should not run without a GPU")
    except RuntimeError as e:
        assert f"CUDA kernel 'saxpy' of 'kernels.cu' {NO_GPU}" in str(e)

    # On the emulated GPU, a CUDA C++ kernel needs a CPU stand-in: here a
    # NumPy function of the launch, reading the pointers and scalars the native
    # handler packed. Everything before the launch is real (NVRTC's compile for
    # sm_90, the layout check, the handler called by XLA); the kernel body is
    # the stand-in, so this checks the plumbing, not the CUDA code.
    def saxpy_stand_in(launch):
        n = int(launch.value(4, "int32"))
        assert launch.grid[0] * launch.block[0] >= n  # enough threads
        x, y = launch.array(0, np.float32, (n,)), launch.array(1, np.float32, (n,))
        launch.array(2, np.float32, (n,))[:] = launch.value(3, "float32") * x + y

    gpu.define("saxpy", (8, 8, 8, 4, 4), saxpy_stand_in)  # the same EmulatedGPU
    with emulate(gpu, [LOWERING]):  # the launcher's lowering, shared by both bridges
        got = jax.jit(lambda x, y: saxpy_op(x, y, alpha=0.5, n=n))(x, y)
        np.testing.assert_allclose(got, 0.5 * x + y, rtol=1e-6)
        assert gpu.launches[-1][:2] == ((4, 1, 1), (256, 1, 1))  # ceil(1000 / 256) blocks
        got = jax.vmap(lambda x: saxpy_op(x, y, alpha=1.5, n=n))(xs)
        np.testing.assert_allclose(got, 1.5 * xs + y, rtol=1e-6)


# check_kernel on the Triton and the CUDA op, on a GPU or the emulated one (on
# 8 elements: every launch of the emulated one runs on the host). Their
# pointer parameters carry no rank: a kernel reads the `n` elements it is
# told to, so another rank is not refused. Another dtype is refused, or gives
# the right results (check_kernel compares them with the declared dtype's).
def check_gpu_ops():
    kw = {"alpha": 0.5, "n": 8}
    pointers = {
        "bad_inputs: rank": "pointer parameters carry no rank; the kernel reads `n` elements"
    }
    triton_op = triton_kernel(axpy, S((8,), jnp.float32), grid=(1,), BLOCK=256)
    cuda_op = module.kernel("saxpy", S((8,), jnp.float32), launch_dims=8)
    for op, skip in [(triton_op, {**SKIP, **pointers}), (cuda_op, {**SKIP, **pointers})]:
        report = check_kernel(op, X8, Y8, kwargs=kw, reference=lambda x, y: 0.5 * x + y, skip=skip)
        print(report.summary())


if ON_GPU:
    check_gpu_ops()
else:
    with emulate(gpu, [LOWERING]):
        check_gpu_ops()

# --- 8. Pallas: a backend of an XLACustomKernel --------------------------------
# A Pallas kernel is JAX code on refs; pallas_call compiles it on a GPU (via
# Triton or Mosaic GPU) or a TPU. Registered on "cpu" with interpret=True, the
# same generator runs the body as JAX operations: correct, slow, and not the
# code a GPU runs, but it tests the kernel on any machine. A generator with an
# `interpret` parameter gets it from the registration and passes it on.


def rms_norm_body(x_ref, o_ref, *, eps):  # each row divided by its RMS
    x = x_ref[...]
    o_ref[...] = x * jax.lax.rsqrt((x * x).mean(axis=-1, keepdims=True) + eps)


def rms_norm_pallas(outs, *, eps, interpret=False):
    body = functools.partial(rms_norm_body, eps=eps)
    return pl.pallas_call(body, out_shape=outs, interpret=interpret)


def rms_norm_numba(outs, *, eps):
    @numba.njit
    def kernel(x, out):
        for i in range(x.shape[0]):
            total = 0.0
            for j in range(x.shape[1]):
                total += x[i, j] * x[i, j]
            scale = 1.0 / np.sqrt(total / x.shape[1] + eps)
            for j in range(x.shape[1]):
                out[i, j] = x[i, j] * scale

    return kernel


def rms_norm_jnp(x, eps):  # the reference
    return x / jnp.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)


rms_norm = xck.XLACustomKernel("tutorial_rms_norm")
rms_norm.def_numba_kernel(rms_norm_numba)  # cpu: the default
rms_norm.def_pallas_kernel("gpu", rms_norm_pallas)  # compiled, on a GPU
rms_norm.def_pallas_kernel("cpu", rms_norm_pallas, interpret=True)  # for tests
assert rms_norm.defaults == {"cpu": "numba", "gpu": "pallas"}


# pallas_call has a JVP but no transpose: give the operation a JVP rule. Written
# with jnp operations, linear in the tangent, it needs no transpose rule.
@rms_norm.def_jvp_rule
def rms_norm_jvp(primals, tangents, *, outs, eps):
    (x,), (t,) = primals, tangents
    y = rms_norm(x, outs=outs, eps=eps)
    r = jax.lax.rsqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return y, r * (t - y * (y * t).mean(axis=-1, keepdims=True))


def rms_norm_call(x, backend=None):
    return rms_norm(x, outs=S(x.shape, x.dtype), eps=1e-5, backend=backend)


# On the CPU device, also where a GPU is the default: the cpu backends run.
xm = jax.device_put(jax.random.normal(jax.random.key(0), (16, 32)), CPU)
batch = jax.device_put(jax.random.normal(jax.random.key(1), (3, 16, 32)), CPU)
w = jnp.linspace(-1.0, 1.0, 32)
want = rms_norm_jnp(xm, 1e-5)
want_grad = jax.grad(lambda x: (rms_norm_jnp(x, 1e-5) * w).sum())(xm)
for backend in ["numba", "pallas"]:
    f = jax.jit(lambda x, backend=backend: rms_norm_call(x, backend))
    np.testing.assert_allclose(f(xm), want, rtol=1e-5, atol=1e-6)
    # vmap: one numba call for the batch; Pallas adds a grid axis to its call.
    got = jax.jit(jax.vmap(f))(batch)
    np.testing.assert_allclose(got, rms_norm_jnp(batch, 1e-5), rtol=1e-5, atol=1e-6)
    got = jax.jit(jax.grad(lambda x, b=backend: (rms_norm_call(x, b) * w).sum()))(xm)
    np.testing.assert_allclose(got, want_grad, rtol=1e-5, atol=1e-5)
if ON_GPU:  # the gpu default: the compiled Pallas kernel
    got = jax.jit(rms_norm_call)(jax.device_put(xm, jax.devices()[0]))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
# check_kernel runs both cpu backends (numba, the default, and Pallas in
# interpret mode) against each other and the reference, under vmap, the JVP
# rule (against finite differences) and its transpose. A numba kernel compiles
# for any dtype its code takes: check_kernel runs it on int32 inputs and
# compares its results with those on the same values as float32.
xs_cpu = jax.device_put(xm[:4, :8], CPU)
report = check_kernel(
    rms_norm,
    xs_cpu,
    kwargs={"outs": S(xs_cpu.shape, xs_cpu.dtype), "eps": 1e-5},
    reference=lambda x: rms_norm_jnp(x, 1e-5),
    skip=SKIP,
)
assert {r.check for r in report.passed} >= {
    "backends: backend 'pallas'",
    "autodiff: transpose vs JVP (dot-product test)",
}
print(report.summary())
# interpret=True is for the CPU only: on a GPU the compiled kernel runs.
try:
    rms_norm.def_pallas_kernel("tpu", rms_norm_pallas, interpret=True)
    raise AssertionError("interpret=True should be refused on tpu")
except ValueError as e:
    assert "`interpret=True` is for platform 'cpu'" in str(e)

# --- 9. Triton and CUDA C++ kernels as backends, next to a CPU one -------------
# def_triton_kernel's generator returns the bare @triton.jit kernel and the
# keywords of triton_kernel; def_cuda_raw_kernel's returns a CudaModule, the
# kernel's name and the keywords of CudaModule.kernel. Both register on "gpu";
# the call's static keywords that name the kernel's scalars are passed to it.


def axpy_numba(outs, *, alpha, n):
    @numba.njit
    def kernel(x, y, out):
        for i in range(n):
            out[i] = alpha * x[i] + y[i]

    return kernel


def axpy_triton(outs, *, alpha, n):
    return axpy, {"grid": (triton.cdiv(n, 256),), "BLOCK": 256}


def axpy_cuda(outs, *, alpha, n):
    return module, "saxpy", {"launch_dims": n}


scaled_add = xck.XLACustomKernel("tutorial_scaled_add", doc="alpha * x + y")
scaled_add.def_numba_kernel(axpy_numba)
scaled_add.def_triton_kernel(axpy_triton)
scaled_add.def_cuda_raw_kernel(axpy_cuda)
assert scaled_add.available_backends("cpu") == ["numba"]
assert scaled_add.available_backends("gpu") == ["triton", "cuda_raw"]
assert scaled_add.defaults == {"cpu": "numba", "gpu": "triton"}


def scaled_add_call(x, y, backend=None):
    return scaled_add(x, y, outs=S(x.shape, x.dtype), alpha=0.5, n=x.size, backend=backend)


# The backend is chosen for the platform the call is lowered for: on CPU
# arrays, numba.
x_cpu, y_cpu = jax.device_put(x, CPU), jax.device_put(y, CPU)
np.testing.assert_allclose(jax.jit(scaled_add_call)(x_cpu, y_cpu), 0.5 * x + y, rtol=1e-6)
try:
    scaled_add_call(x_cpu, y_cpu, backend="triton")
    raise AssertionError("triton is not a cpu backend")
except xck.UnknownBackendError as e:
    assert "unknown backend 'triton' for platform 'cpu'" in str(e)
if ON_GPU:
    for backend in ["triton", "cuda_raw"]:
        got = jax.jit(lambda x, y, b=backend: scaled_add_call(x, y, b))(x, y)
        np.testing.assert_allclose(got, 0.5 * x + y, rtol=1e-6)
else:
    # Lowered for a GPU here, the default backend (triton) is what fails, and
    # the error says how to switch to another backend.
    try:
        jax.jit(scaled_add_call).trace(x, y).lower(lowering_platforms=("cuda",))
        raise AssertionError("lowering a GPU op needs a CUDA device")
    except xck.BackendError as e:
        message = str(e)
    assert "backend 'triton' of kernel 'tutorial_scaled_add' failed on platform 'gpu'" in message
    assert NO_GPU in message
    assert "set_default('gpu', 'cuda_raw')" in message
# The cpu backend checked (the gpu ones are the ops check_gpu_ops checked).
x8_cpu, y8_cpu = jax.device_put(X8, CPU), jax.device_put(Y8, CPU)
report = check_kernel(
    scaled_add,
    x8_cpu,
    y8_cpu,
    kwargs={"outs": S((8,), jnp.float32), "alpha": 0.5, "n": 8},
    reference=lambda x, y: 0.5 * x + y,
    skip=SKIP,
)
print(report.summary())

# --- 10. Warp kernels: one op for the CPU and the GPU -------------------------
# A warp_kernel op runs where its inputs are. On a GPU, Warp builds the
# kernel's module for the GPU's architecture (into Warp's kernel cache) and
# the launcher packs Warp's launch bounds and array structs from the call
# frame; grad launches Warp's backward entry the same way.
wp.config.log_level = wp.LOG_WARNING


@wp.kernel
def softplus(x: wp.array(dtype=wp.float32), beta: wp.float32, out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    out[i] = wp.log(1.0 + wp.exp(beta * x[i])) / beta


softplus_op = warp_kernel(softplus, S((n,), jnp.float32))


def softplus_loss(x):
    return softplus_op(x, beta=2.0).sum()


def reference_loss(x):
    return (jnp.log1p(jnp.exp(2.0 * x)) / 2.0).sum()


# On the CPU: Warp's CPU build, called natively.
np.testing.assert_allclose(
    jax.jit(jax.grad(softplus_loss))(x_cpu), jax.grad(reference_loss)(x_cpu), rtol=1e-5
)
# check_kernel on the CPU. Warp's gradient is a jax.custom_vjp (reverse mode
# only): check_kernel says so, skips the forward-mode rows and checks grad
# against finite differences.
report = check_kernel(
    warp_kernel(softplus, S((8,), jnp.float32)),
    jax.device_put(X8, CPU),
    kwargs={"beta": 2.0},
    reference=lambda x: jnp.log1p(jnp.exp(2.0 * x)) / 2.0,
    skip=SKIP,
)
print(report.summary())
if ON_GPU:
    got = jax.jit(jax.grad(softplus_loss))(x)
    np.testing.assert_allclose(got, jax.grad(reference_loss)(x), rtol=1e-5)
else:
    # The emulated GPU again (the same one: its stand-ins chain), each launch
    # run by Warp's CPU build of the kernel on the bytes the handler packed for
    # the CUDA entry: forward and backward.
    gpu = on_cpu(gpu)
    with emulate(gpu, [WARP_LOWERING]):
        value, got = jax.jit(jax.value_and_grad(softplus_loss))(x)
        np.testing.assert_allclose(value, reference_loss(x), rtol=1e-5)
        np.testing.assert_allclose(got, jax.grad(reference_loss)(x), rtol=1e-5)
        entries = [entry for _, entry, *_ in gpu.loaded if entry.startswith("softplus")]
        assert sorted(e.rsplit("_", 1)[-1] for e in entries) == ["backward", "forward"]
        grid, block, _, _ = gpu.launches[-1]
        assert block == (256, 1, 1) and grid == (-(-n // 256), 1, 1)

print("all steps passed")
