"""Public entry points on a machine without a GPU: every refusal of bad input,
the GPU-only error, and importing without numba-cuda."""

import subprocess
import sys

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from ffi_core.testing import whole_message
from numba import cuda
from numba_cuda_ffi import SUPPORTED_DTYPES, numba_cuda_callable, numba_cuda_kernel, temporary

S = jax.ShapeDtypeStruct
F4 = S((4,), jnp.float32)
# What one output of `outs` may be, as the messages say it.
OUTPUT_SPEC = (
    "an object with `shape` and `dtype` (a jax.ShapeDtypeStruct, a jax.core.ShapedArray, an array)"
)
HAS_GPU = cuda.is_available()


@cuda.jit
def copy(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


@cuda.jit(device=True)
def device_fn(x):
    return x


@numba.njit
def cpu_kernel(x, out):
    out[:] = x


def twice(x, out, stream):
    pass


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        (copy.py_func, "<class 'function'>"),
        (3, "<class 'int'>"),
        (
            cpu_kernel,
            "<class 'numba.core.registry.CPUDispatcher'>; for a @numba.njit kernel use "
            "numba_cpu_ffi.numba_kernel",
        ),
    ],
)
def test_kernel_must_be_cuda_dispatcher(kernel, message):
    full = f"`kernel` must be a @numba.cuda.jit kernel (a numba CUDA dispatcher), got {message}"
    with pytest.raises(TypeError, match=whole_message(full)):
        numba_cuda_kernel(kernel, F4, launch_dims=4)


def test_device_function_refused():
    message = (
        "`kernel` 'device_fn' is a device function (@cuda.jit(device=True)); wrap a kernel, "
        "which device functions can be called from"
    )
    with pytest.raises(TypeError, match=whole_message(message)):
        numba_cuda_kernel(device_fn, F4, launch_dims=4)


def test_linked_kernel_refused(tmp_path):
    source = tmp_path / "ext.cu"
    source.write_text('extern "C" __device__ int ext(int* r, int x) { *r = x; return 0; }\n')
    linked = cuda.jit(link=[str(source)])(copy.py_func)
    message = (
        "kernel 'copy' links external code (`link=`), which numba_cuda_kernel does not load; "
        "launch it from numba_cuda_ffi.numba_cuda_callable instead"
    )
    with pytest.raises(NotImplementedError, match=whole_message(message)):
        numba_cuda_kernel(linked, F4, launch_dims=4)


def test_launch_errors_surface_from_kernel():
    message = "give either `grid` and `block`, or `launch_dims` (total threads per axis); got none"
    with pytest.raises(ValueError, match=whole_message(message)):
        numba_cuda_kernel(copy, F4)


@pytest.mark.parametrize(
    ("outs", "error", "message"),
    [
        (
            3,
            TypeError,
            f"`outs` must be {OUTPUT_SPEC} or a sequence or pytree of them, got <class 'int'>",
        ),
        ([F4, 3], TypeError, f"`outs[1]` must be {OUTPUT_SPEC}, got <class 'int'>"),
        (
            {"a": F4, "b": "f"},
            TypeError,
            f"`outs` must be {OUTPUT_SPEC} or a sequence or pytree of them, got a leaf "
            "of <class 'str'>",
        ),
        ([], ValueError, "`outs` must hold at least one jax.ShapeDtypeStruct, got none"),
        (
            S((4,), jnp.bfloat16),
            TypeError,
            f"`outs` entry 0 (ShapeDtypeStruct(shape=(4,), dtype=bfloat16)) has dtype bfloat16, "
            f"which numba CUDA kernels do not take; supported: {', '.join(SUPPORTED_DTYPES)}",
        ),
    ],
)
@pytest.mark.parametrize("api", ["kernel", "callable"])
def test_outs_refused(api, outs, error, message):
    with pytest.raises(error, match=whole_message(message)):
        if api == "kernel":
            numba_cuda_kernel(copy, outs, launch_dims=4)
        else:
            numba_cuda_callable(twice, outs)


def test_vmap_method_refused():
    message = (
        "`vmap_method` must be one of None, 'sequential', 'sequential_unrolled', 'expand_dims', "
        "'broadcast_all', 'fold', got 'legacy_vectorized'"
    )
    with pytest.raises(ValueError, match=whole_message(message)):
        numba_cuda_kernel(copy, F4, launch_dims=4, vmap_method="legacy_vectorized")
    message = (
        "`vmap_method` must be one of None, 'sequential', 'sequential_unrolled', 'expand_dims', "
        "'broadcast_all', got 'fold'"
    )
    with pytest.raises(ValueError, match=whole_message(message)):
        numba_cuda_callable(twice, F4, vmap_method="fold")


@pytest.mark.parametrize(
    ("aliases", "error", "message"),
    [
        (
            [(0, 0)],
            TypeError,
            "`input_output_aliases` must be a dict {input index: output index}, got <class 'list'>",
        ),
        ({"0": 0}, TypeError, "`input_output_aliases` input indices must be ints, got '0'"),
        ({0: 1.0}, TypeError, "`input_output_aliases` output indices must be ints, got 1.0"),
        ({0: True}, TypeError, "`input_output_aliases` output indices must be ints, got True"),
        ({-1: 0}, ValueError, "`input_output_aliases` input indices must be >= 0, got -1"),
        (
            {0: 1},
            ValueError,
            "`input_output_aliases` maps input 0 to output 1, but there are 1 outputs (valid: 0 to 0)",
        ),
    ],
)
def test_aliases_refused(aliases, error, message):
    with pytest.raises(error, match=whole_message(message)):
        numba_cuda_kernel(copy, F4, launch_dims=4, input_output_aliases=aliases)


def test_several_inputs_to_one_output():
    message = "`input_output_aliases` maps several inputs to one output: {0: 0, 1: 0}"
    with pytest.raises(ValueError, match=whole_message(message)):
        numba_cuda_kernel(copy, F4, launch_dims=4, input_output_aliases={0: 0, 1: 0})


def test_call_checks():
    f = numba_cuda_kernel(copy, F4, launch_dims=4, input_output_aliases={0: 0})
    x = jnp.ones(4, jnp.float32)
    message = (
        "kernel 'copy' takes 2 arguments but is called with 2 inputs and 1 outputs (3 arrays); "
        "the convention is kernel(in_1, ..., in_n, out_1, ..., out_m)"
    )
    with pytest.raises(TypeError, match=whole_message(message)):
        f(x, x)
    with pytest.raises(
        TypeError,
        match=whole_message(
            "input 0 of kernel 'copy' must be an array (jax.Array or numpy.ndarray), got <class 'list'>"
        ),
    ):
        f([1.0])
    with pytest.raises(
        TypeError,
        match=whole_message(
            f"input 0 of kernel 'copy' has dtype bfloat16, which numba CUDA kernels do not take; "
            f"supported: {', '.join(SUPPORTED_DTYPES)}"
        ),
    ):
        f(x.astype(jnp.bfloat16))
    with pytest.raises(
        ValueError,
        match=whole_message(
            "`input_output_aliases` maps input 0 (float32[3]) to output 0 (float32[4]); aliased "
            "buffers must have the same shape and dtype"
        ),
    ):
        f(x[:3])
    g = numba_cuda_kernel(copy, [F4, F4], launch_dims=4, input_output_aliases={3: 1})
    with pytest.raises(TypeError):
        g(x)  # arity first
    h = numba_cuda_callable(lambda *a: None, F4, input_output_aliases={2: 0})
    with pytest.raises(
        ValueError,
        match=whole_message(
            "`input_output_aliases` maps input 2 to output 0, but callable '<lambda>' is called "
            "with 1 inputs (valid: 0 to 0)"
        ),
    ):
        h(x)


def test_callable_checks():
    with pytest.raises(
        TypeError, match=whole_message("`func` must be a callable, got <class 'int'>")
    ):
        numba_cuda_callable(3, F4)
    f = numba_cuda_callable(twice, F4)
    message = (
        "callable 'twice' takes 3 arguments but is called with 2 inputs and 1 outputs; the "
        "convention is func(in_1, ..., in_n, out_1, ..., out_m, stream)"
    )
    with pytest.raises(TypeError, match=whole_message(message)):
        f(jnp.ones(4), jnp.ones(4))


def test_temporary_outside_a_call():
    message = (
        "numba_cuda_ffi.temporary() allocates on the stream of a running numba_cuda_callable "
        "call; call it inside that function"
    )
    with pytest.raises(RuntimeError, match=whole_message(message)):
        temporary(4, np.float32)


@pytest.mark.skipif(HAS_GPU, reason="checks the error given where JAX has no GPU")
@pytest.mark.parametrize("api", ["kernel", "callable"])
def test_without_gpu_says_what_is_missing(api):
    x = jnp.ones(4, jnp.float32)
    if api == "kernel":
        f, what = numba_cuda_kernel(copy, F4, launch_dims=4), "numba cuda kernel 'copy'"
    else:
        f, what = numba_cuda_callable(twice, F4), "numba cuda callable 'twice'"
    message = (
        f"{what} runs on NVIDIA GPUs, but JAX has no CUDA device here; install a CUDA build of "
        'JAX (`uv add "jax[cuda13]"`) on a machine with an NVIDIA GPU and driver'
    )
    with pytest.raises(RuntimeError, match=whole_message(message)):
        f(x)
    with pytest.raises(RuntimeError, match=whole_message(message)):
        jax.jit(f)(x)


_NO_NUMBA_CUDA = """
import sys
sys.modules["numba.cuda"] = None  # as if numba-cuda were not installed
import numba_cuda_ffi
print("imported")
try:
    numba_cuda_ffi.numba_cuda_kernel(object(), None, launch_dims=1)
except ImportError as exc:
    print(exc)
"""


def test_import_without_numba_cuda():
    out = subprocess.run(
        [sys.executable, "-c", _NO_NUMBA_CUDA], capture_output=True, text=True, check=True
    ).stdout
    assert out == (
        "imported\n"
        'numba-cuda-ffi needs numba-cuda: install it with `pip install "numba-cuda-ffi[cu13]"` '
        "(from wheels built from the repository: "
        '`pip install --find-links DIR "numba-cuda-ffi[cu13]"`; in a uv project: '
        '`uv add "numba-cuda-ffi[cu13]"`) for CUDA 13, or the same with "numba-cuda-ffi[cu12]" '
        "for CUDA 12; these bring `numba-cuda[cu13]` / `numba-cuda[cu12]`\n"
    )


_NUMPY_MISMATCH = """
import sys
import numpy

class _Removed:  # numba-cuda 0.30 under NumPy 2.5: numpy.row_stack is gone
    def find_spec(self, name, path=None, target=None):
        if name == "numba.cuda.np.arrayobj":
            raise AttributeError("module 'numpy' has no attribute 'row_stack'")

sys.meta_path.insert(0, _Removed())
numpy.__version__ = "2.5.0"
import numba_cuda_ffi
from numba import cuda

@cuda.jit
def k(x, out):
    out[0] = x[0]

try:
    numba_cuda_ffi.numba_cuda_kernel(k, None, launch_dims=1)
except ImportError as exc:
    print(exc)
"""


def test_numba_cuda_numpy_mismatch_is_named():
    from importlib.metadata import version

    out = subprocess.run(
        [sys.executable, "-c", _NUMPY_MISMATCH], capture_output=True, text=True, check=True
    ).stdout
    assert out == (
        f"numba-cuda {version('numba-cuda')} does not work with NumPy 2.5.0: it fails with "
        "module 'numpy' has no attribute 'row_stack' when it compiles a kernel. Install a NumPy "
        'it supports (`pip install "numpy<2.5"`; in a uv project: `uv add "numpy<2.5"`), or a '
        "numba-cuda release made for this NumPy\n"
    )
