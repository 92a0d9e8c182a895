"""Bad input gets a Python exception naming the argument and what is accepted;
each message is matched whole."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import warp as wp
from warp._src.types import type_repr
from warp_ffi import KernelCompileError, jaxinfo_to_warpinfo, jaxtype_to_warptype, warp_kernel

S = jax.ShapeDtypeStruct
X = jnp.ones(4, jnp.float32)


@wp.kernel
def axpy(
    x: wp.array(dtype=wp.float32),
    y: wp.array(dtype=wp.float32),
    alpha: float,
    out: wp.array(dtype=wp.float32),
):
    i = wp.tid()
    out[i] = alpha * x[i] + y[i]


@wp.kernel
def counts(n: wp.int32, out: wp.array(dtype=wp.int32)):
    i = wp.tid()
    out[i] = n


@wp.struct
class Particle:
    x: float


@wp.kernel
def structs(x: wp.array(dtype=Particle), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = x[i].x


@wp.kernel
def with_vec_param(v: wp.vec3, out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = v[0]


@wp.kernel(module="unique")
def broken(x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    i = wp.tid()
    out[i] = x[i] * 2.0  # float64 times a float32 literal: Warp refuses it


def raises(exc, message):
    # The whole message; JAX may add its note on filtered frames below it.
    return pytest.raises(exc, match=f"(?s)^{re.escape(message)}(\n-+\nFor simplicity, .*)?$")


def test_not_a_warp_kernel():
    with raises(
        TypeError,
        "`kernel` must be a @wp.kernel function (a warp Kernel), got <class 'function'>",
    ):
        warp_kernel(lambda x: x, S((4,), jnp.float32))


def test_unsupported_parameter_types():
    with raises(
        TypeError,
        f"parameter 'x' of warp kernel 'structs' is an array of {type_repr(Particle)}; warp-ffi "
        "passes arrays of scalars (bool, int8, int16, int32, int64, uint8, uint16, uint32, "
        "uint64, float16, float32, float64, bfloat16) and of Warp's vectors, matrices, quaternions and "
        "transforms of them",
    ):
        warp_kernel(structs, S((4,), jnp.float32))
    with raises(
        TypeError,
        "parameter 'v' of warp kernel 'with_vec_param' has type vec3f; warp-ffi passes "
        "wp.array parameters and scalars (bool, int8, int16, int32, int64, uint8, uint16, "
        "uint32, uint64, float16, float32, float64, bfloat16)",
    ):
        warp_kernel(with_vec_param, S((4,), jnp.float32))


def test_array_count():
    f = warp_kernel(axpy, S((4,), jnp.float32))
    with raises(
        TypeError,
        "warp kernel 'axpy' has 3 array parameters (x, y, out) and scalar parameters (alpha) "
        "given as keywords, but is called with 1 inputs and 1 outputs (2 arrays); the "
        "convention is kernel(in_1, ..., in_n, out_1, ..., out_m) with scalars anywhere",
    ):
        f(X, alpha=1.0)
    with raises(TypeError, "`outs` holds 4 outputs, but warp kernel 'axpy' has 3 array parameters"):
        warp_kernel(axpy, [S((4,), jnp.float32)] * 4)


def test_input_dtype_and_rank():
    f = warp_kernel(axpy, S((4,), jnp.float32))
    with raises(
        TypeError,
        "input 1 of warp kernel 'axpy' (parameter 'y') is int32[1d], but the kernel declares "
        "wp.array(float32, 1-d)",
    ):
        f(X, jnp.ones(4, jnp.int32), alpha=1.0)
    with raises(
        TypeError,
        "input 0 of warp kernel 'axpy' (parameter 'x') is float32[2d], but the kernel declares "
        "wp.array(float32, 1-d)",
    ):
        f(X.reshape(2, 2), X, alpha=1.0)
    with raises(
        TypeError,
        "input 0 of warp kernel 'axpy' has dtype complex64, which Warp kernels do not take; "
        "supported: bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, "
        "float32, float64, bfloat16",
    ):
        f(X.astype(jnp.complex64), X, alpha=1.0)
    with raises(
        TypeError,
        "input 0 of warp kernel 'axpy' must be an array (jax.Array or numpy.ndarray), got "
        "<class 'list'>",
    ):
        f([1.0], X, alpha=1.0)


def test_output_declared_with_another_dtype():
    with raises(
        TypeError,
        "`outs` entry 0 is float64[4], but warp kernel 'axpy' declares its output parameter "
        "'out' as wp.array(float32, 1-d)",
    ):
        warp_kernel(axpy, S((4,), jnp.float64))
    with raises(
        TypeError,
        "`outs` entry 0 is float32[2, 2], but warp kernel 'axpy' declares its output parameter "
        "'out' as wp.array(float32, 1-d)",
    ):
        warp_kernel(axpy, S((2, 2), jnp.float32))


def test_scalars():
    f = warp_kernel(axpy, S((4,), jnp.float32))
    with raises(
        TypeError,
        "warp kernel 'axpy' needs its scalar parameter 'alpha' (float32) as a keyword argument, "
        "e.g. op(..., alpha=...)",
    ):
        f(X, X)
    with raises(
        TypeError,
        "warp kernel 'axpy' has no scalar parameter 'beta' (its scalar parameters: alpha)",
    ):
        f(X, X, alpha=1.0, beta=2.0)
    with raises(
        TypeError,
        "scalar parameter 'alpha' of warp kernel 'axpy' (float32) must be a number, got '1'",
    ):
        f(X, X, alpha="1")
    with raises(
        OverflowError,
        "scalar parameter 'alpha' of warp kernel 'axpy' (float32) is 1e+300, beyond its "
        "largest value 3.40282e+38",
    ):
        f(X, X, alpha=1e300)
    assert np.isinf(f(X, X, alpha=float("inf"))).all()  # inf itself is a float32
    with raises(
        TypeError,
        "scalar parameter 'alpha' of warp kernel 'axpy' (float32) is static: it takes a Python "
        "or NumPy number, got a traced or device array; pass arrays as inputs",
    ):
        jax.jit(lambda a: f(X, X, alpha=a))(1.0)
    g = warp_kernel(counts, S((4,), jnp.int32))
    with raises(
        TypeError,
        "scalar parameter 'n' of warp kernel 'counts' (int32) must be an int, got 1.5 (a float is "
        "not truncated)",
    ):
        g(n=1.5)
    with raises(
        OverflowError,
        "scalar parameter 'n' of warp kernel 'counts' (int32) is 4294967296, outside its "
        "range [-2147483648, 2147483647]",
    ):
        g(n=2**32)
    np.testing.assert_array_equal(g(n=7), [7] * 4)  # no inputs at all


@pytest.mark.parametrize(
    ("launch_dims", "exc", "message"),
    [
        (
            "4",
            TypeError,
            "`launch_dims` must be an int, a tuple of 1 to 4 ints, or a callable of the input "
            "shapes returning one, got '4'",
        ),
        (
            (2.0,),
            TypeError,
            "`launch_dims` must be an int, a tuple of 1 to 4 ints, or a callable of the input "
            "shapes returning one, got (2.0,)",
        ),
        (-1, ValueError, "`launch_dims` must be non-negative, got -1"),
        (
            (1, 2, 3, 4, 5),
            ValueError,
            "`launch_dims` must have 1 to 4 dimensions, got (1, 2, 3, 4, 5)",
        ),
        ((), ValueError, "`launch_dims` must have 1 to 4 dimensions, got ()"),
    ],
    ids=["str", "float", "negative", "5d", "empty"],
)
def test_launch_dims(launch_dims, exc, message):
    with raises(exc, message):
        warp_kernel(axpy, S((4,), jnp.float32), launch_dims=launch_dims)


def test_launch_dims_callable_result_is_checked_at_trace_time():
    f = warp_kernel(axpy, S((4,), jnp.float32), launch_dims=lambda x, y: -x[0])
    with raises(ValueError, "what `launch_dims` returned must be non-negative, got -4"):
        jax.jit(lambda: f(X, X, alpha=1.0))()


def test_aliases():
    with raises(
        ValueError,
        "`input_output_aliases` maps input 0 to output 1, but there are 1 outputs (valid: 0 to 0)",
    ):
        warp_kernel(axpy, S((4,), jnp.float32), input_output_aliases={0: 1})
    f = warp_kernel(axpy, S((4,), jnp.float32), input_output_aliases={2: 0})
    with raises(
        ValueError,
        "`input_output_aliases` maps input 2 to output 0, but warp kernel 'axpy' is called "
        "with 2 inputs (valid: 0 to 1)",
    ):
        f(X, X, alpha=1.0)


def test_vmap_method():
    with raises(
        ValueError,
        "`vmap_method` must be one of None, 'sequential', 'sequential_unrolled', 'expand_dims', "
        "'broadcast_all', got 'legacy'",
    ):
        warp_kernel(axpy, S((4,), jnp.float32), vmap_method="legacy")


def test_kernel_that_does_not_compile():
    # On the CPU (conftest); on a GPU the message names the GPU (test_gpu.py).
    f = warp_kernel(broken, S((2,), jnp.float64))
    with jax.enable_x64(True) if hasattr(jax, "enable_x64") else jax.experimental.enable_x64():
        x = jnp.ones(2, jnp.float64)
        with pytest.raises(KernelCompileError) as info:
            jax.jit(f)(x)
    message = str(info.value)
    assert message.startswith(
        "warp kernel 'broken' does not compile for arrays of (float64, float64): "
        'RuntimeError: Error while parsing function "broken"'
    ), message
    assert "Input types must be the same, got ['float64', 'float32']" in message


def _has_cuda_device() -> bool:
    try:
        return bool(jax.devices("cuda"))
    except RuntimeError:  # no CUDA backend in this JAX, or no GPU for it
        return False


def test_gpu_lowering_without_a_gpu_says_what_to_do():
    if _has_cuda_device():
        pytest.skip("this machine has a CUDA device: the lowering for 'cuda' finds it")
    f = warp_kernel(axpy, S((4,), jnp.float32))
    with raises(
        RuntimeError,
        "warp kernel 'axpy' runs on NVIDIA GPUs, but JAX has no CUDA device here; install a "
        'CUDA build of JAX (`uv add "jax[cuda13]"`) on a machine with an NVIDIA GPU and driver',
    ):
        jax.export.export(jax.jit(lambda x: f(x, x, alpha=1.0)), platforms=["cuda"])(X)


def test_amd_gpu_lowering_is_refused():
    f = warp_kernel(axpy, S((4,), jnp.float32))
    with raises(
        NotImplementedError,
        "warp kernel 'axpy' was called on an AMD GPU: Warp builds kernels for NVIDIA GPUs and "
        "CPUs; put the inputs on a CPU or CUDA device",
    ):
        jax.export.export(jax.jit(lambda x: f(x, x, alpha=1.0)), platforms=["rocm"])(X)


def test_dtype_conversion_refusals():
    with raises(
        TypeError,
        "`dtype` must be one of the dtypes Warp arrays take (bool, int8, int16, int32, int64, "
        "uint8, uint16, uint32, uint64, float16, float32, float64, bfloat16), got <class "
        "'jax.numpy.complex64'>",
    ):
        jaxtype_to_warptype(jnp.complex64)
    with raises(
        TypeError, "`info` must be a jax.ShapeDtypeStruct (shape and dtype), got <class 'int'>"
    ):
        jaxinfo_to_warpinfo(3)
    with raises(ValueError, "`info` must have 1 to 4 dimensions (Warp arrays), got shape ()"):
        jaxinfo_to_warpinfo(S((), jnp.float32))


def test_missing_warp_names_the_install_command():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["warp"] = None  # as if warp-lang were not installed
        try:
            import warp_ffi
        except ImportError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        "warp-ffi needs NVIDIA Warp (the package warp-lang): install it with "
        '`pip install "warp-ffi"` (from wheels built from the repository: '
        '`pip install --find-links DIR "warp-ffi"`; in a uv project: `uv add "warp-ffi"`)'
    )


def test_symbolic_shapes_are_refused_with_what_to_do():
    # jax.export with a symbolic batch: the handler is compiled per shape.
    import ffi_core

    op = warp_kernel(axpy, jax.ShapeDtypeStruct((4,), jnp.float32))
    (b,) = jax.export.symbolic_shape("b")
    spec = jax.ShapeDtypeStruct((b, 4), jnp.float32)
    message = (
        "warp kernel 'axpy' cannot be lowered with symbolic shapes: its input 0 has the shape "
        "(b, 4), and its native handler is compiled for concrete shapes. Export (or lower) it "
        "with concrete shapes, once per shape you need"
    )
    with pytest.raises(NotImplementedError, match=f"^{re.escape(message)}$"):
        ffi_core.export(jax.jit(jax.vmap(lambda x, y: op(x, y, alpha=2.0))))(spec, spec)
