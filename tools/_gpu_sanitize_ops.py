"""The ops ``gpu_check_sanitize.py`` runs under ``compute-sanitizer``: for each
of CUDA source, numba-cuda and Triton, a kernel that reads and writes one
element past its buffers' end and the same kernel within them. They are
module attributes, as ``check_kernel(sanitize=True)`` needs: its child process
imports this module and finds the op by name."""

import jax
import jax.numpy as jnp

N = 1024
SPEC = jax.ShapeDtypeStruct((N,), jnp.float32)

SOURCE = r"""
extern "C" __global__ void cu_over_by_one(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i] = 2.0f * x[i];
}

extern "C" __global__ void cu_within(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}
"""


def _cuda_source():
    from cuda_source_ffi import load_cuda_inline

    module = load_cuda_inline(
        SOURCE,
        kernels={"cu_over_by_one": ["in", "out", "n:int32"], "cu_within": ["in", "out", "n:int32"]},
        name="gpu_sanitize.cu",
    )
    return (
        module.kernel("cu_over_by_one", SPEC, launch_dims=N + 1),
        module.kernel("cu_within", SPEC, launch_dims=N),
    )


def _numba_cuda():
    from numba import cuda
    from numba_cuda_ffi import numba_cuda_kernel

    @cuda.jit
    def nb_over_by_one(x, out):
        i = cuda.grid(1)
        if i <= out.shape[0]:
            out[i] = 2.0 * x[i]

    @cuda.jit
    def nb_within(x, out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = 2.0 * x[i]

    return (
        numba_cuda_kernel(nb_over_by_one, SPEC, launch_dims=N + 1),
        numba_cuda_kernel(nb_within, SPEC, launch_dims=N),
    )


def _triton():
    import triton
    import triton.language as tl
    from triton_ffi import triton_kernel

    @triton.jit
    def tr_over_by_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = i <= n
        tl.store(out_ptr + i, 2.0 * tl.load(x_ptr + i, mask=mask), mask=mask)

    @triton.jit
    def tr_within(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = i < n
        tl.store(out_ptr + i, 2.0 * tl.load(x_ptr + i, mask=mask), mask=mask)

    def op(kernel):
        return triton_kernel(kernel, SPEC, grid=(triton.cdiv(N + 1, 256),), BLOCK=256)

    return op(tr_over_by_one), op(tr_within)


cu_over_by_one, cu_within = _cuda_source()
nb_over_by_one, nb_within = _numba_cuda()
tr_over_by_one, tr_within = _triton()
