"""Errors: exceptions raised inside kernels, and every refusal of bad input."""

import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numba
import numpy as np
import pytest
from ffi_core.testing import whole_message
from numba_cpu_ffi import SUPPORTED_DTYPES, KernelCompileError, numba_kernel

S = jax.ShapeDtypeStruct
F3 = S((3,), jnp.float32)
SUPPORTED = ", ".join(SUPPORTED_DTYPES)
# What one output of `outs` may be, as the messages say it.
OUTPUT_SPEC = (
    "an object with `shape` and `dtype` (a jax.ShapeDtypeStruct, a jax.core.ShapedArray, an array)"
)


@numba.njit
def checked(x, out):
    if x[0] < 0:
        raise ValueError("negative input")
    for i in range(x.shape[0]):
        out[i] = x[i]


@numba.njit
def copy(x, out):
    out[...] = x


@numba.njit
def bad_attribute(x, out):
    out[0] = x[0].nonexistent_attr


@numba.njit
def complex_into_int(x, out):
    out[0] = 1j


def plain(x, out):
    out[...] = x


# --- exceptions raised inside the kernel ------------------------------------

# XLA prefixes the status code of the FFI error.
RAISED = "UNKNOWN: numba kernel 'checked' raised ValueError: negative input"


def _raises_kernel_error():
    # An XLA run-time error: jax.errors.JaxRuntimeError, or ValueError from
    # JAX's C++ fast path for an executable that already ran.
    return pytest.raises(Exception, match=whole_message(RAISED))


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_kernel_exception_becomes_python_exception(jit):
    f = numba_kernel(checked, F3)
    f = jax.jit(f) if jit else f
    good = jnp.arange(3.0, dtype=jnp.float32)
    with pytest.raises(jax.errors.JaxRuntimeError, match=whole_message(RAISED)) as info:
        f(good - 1).block_until_ready()
    assert isinstance(info.value, Exception)
    np.testing.assert_array_equal(f(good), good)
    with _raises_kernel_error():
        f(good - 1).block_until_ready()
    np.testing.assert_array_equal(f(good + 1), good + 1)


@pytest.mark.parametrize("method", [None, "sequential"])
def test_kernel_exception_under_vmap(method):
    f = jax.vmap(numba_kernel(checked, F3, vmap_method=method))
    rows = jnp.arange(12.0, dtype=jnp.float32).reshape(4, 3)
    np.testing.assert_array_equal(f(rows), rows)
    with _raises_kernel_error():
        f(rows.at[2, 0].set(-1.0)).block_until_ready()
    with _raises_kernel_error():
        f(-rows - 1).block_until_ready()  # every row raises: still one error
    np.testing.assert_array_equal(f(rows + 1), rows + 1)


# --- refused arguments --------------------------------------------------------


def _cuda_kernel():
    try:
        from numba import cuda

        @cuda.jit
        def cuda_copy(x, out):
            out[0] = x[0]

    except Exception as exc:  # no CUDA toolkit bindings: nothing to refuse
        pytest.skip(f"numba.cuda.jit is not available here: {exc}")
    return cuda_copy


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda: plain, "<class 'function'>"),
        (lambda: lambda x, out: None, "<class 'function'>"),
        (lambda: copy.py_func, "<class 'function'>"),
        (lambda: 3, "<class 'int'>"),
        (
            _cuda_kernel,
            "<class 'numba.cuda.dispatcher.CUDADispatcher'>; for a numba.cuda.jit kernel "
            "use numba_cuda_ffi.numba_cuda_kernel",
        ),
    ],
    ids=["function", "lambda", "py_func", "int", "cuda"],
)
def test_kernel_must_be_njit(make, kind):
    message = f"`kernel` must be a @numba.njit function (a numba CPU dispatcher), got {kind}"
    with pytest.raises(TypeError, match=whole_message(message)):
        numba_kernel(make(), F3)


@pytest.mark.parametrize(("n_in", "n_out"), [(2, 1), (0, 1), (1, 2)])
def test_kernel_arity(n_in, n_out):
    f = numba_kernel(copy, [F3] * n_out)
    message = (
        f"kernel 'copy' takes 2 arguments but is called with {n_in} inputs and {n_out} "
        f"outputs ({n_in + n_out} arrays); the convention is "
        "kernel(in_1, ..., in_n, out_1, ..., out_m)"
    )
    with pytest.raises(TypeError, match=whole_message(message)):
        f(*[jnp.ones(3, jnp.float32)] * n_in)


@pytest.mark.parametrize(
    ("outs", "message"),
    [
        (
            3,
            f"`outs` must be {OUTPUT_SPEC} or a sequence or pytree of them, got <class 'int'>",
        ),
        (
            "f",
            f"`outs` must be {OUTPUT_SPEC} or a sequence or pytree of them, got <class 'str'>",
        ),
        ([F3, 3], f"`outs[1]` must be {OUTPUT_SPEC}, got <class 'int'>"),
        (
            {"a": F3, "b": "f"},
            f"`outs` must be {OUTPUT_SPEC} or a sequence or pytree of them, got "
            "a leaf of <class 'str'>",
        ),
    ],
    ids=["int", "str", "list-with-int", "dict-with-str"],
)
def test_outs_type(outs, message):
    with pytest.raises(TypeError, match=whole_message(message)):
        numba_kernel(copy, outs)


@pytest.mark.parametrize("outs", [[], (), {}], ids=["list", "tuple", "dict"])
def test_outs_empty(outs):
    message = "`outs` must hold at least one jax.ShapeDtypeStruct, got none"
    with pytest.raises(ValueError, match=whole_message(message)):
        numba_kernel(copy, outs)


def _dtype_message(what, dtype):
    return f"{what} has dtype {dtype}, which numba CPU kernels do not take; supported: {SUPPORTED}"


@pytest.mark.parametrize(
    ("dtype", "shown"),
    [
        (jnp.bfloat16, "bfloat16"),
        (jnp.float16, "float16"),
        (ml_dtypes.float8_e4m3fn, "float8_e4m3fn"),
        (ml_dtypes.float8_e5m2, "float8_e5m2"),
        (np.dtype(object), "object"),
        (np.dtype(str), "<U0"),
    ],
    ids=["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "object", "str"],
)
def test_outs_dtype(dtype, shown):
    out = S((3,), dtype)
    message = _dtype_message(f"`outs` entry 1 ({out})", shown)
    with pytest.raises(TypeError, match=whole_message(message)):
        numba_kernel(copy, [F3, out])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: [1.0, 2.0, 3.0],
            "input 0 of kernel 'copy' must be an array (jax.Array or numpy.ndarray), "
            "got <class 'list'>",
        ),
        (
            lambda: 1.0,
            "input 0 of kernel 'copy' must be an array (jax.Array or numpy.ndarray), "
            "got <class 'float'>",
        ),
        (lambda: jnp.ones(3, jnp.bfloat16), _dtype_message("input 0 of kernel 'copy'", "bfloat16")),
        (lambda: np.ones(3, np.float16), _dtype_message("input 0 of kernel 'copy'", "float16")),
        (
            lambda: np.ones(3, ml_dtypes.float8_e4m3fn),
            _dtype_message("input 0 of kernel 'copy'", "float8_e4m3fn"),
        ),
        (lambda: np.array([1, "a"], object), _dtype_message("input 0 of kernel 'copy'", "object")),
    ],
    ids=["list", "float", "bfloat16", "float16", "float8", "object"],
)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_input_refused(make, message, jit):
    f = numba_kernel(copy, F3)
    x = make()
    if jit and isinstance(x, jax.Array):
        f = jax.jit(f)
    with pytest.raises(TypeError, match=whole_message(message)):
        f(x)


@pytest.mark.parametrize(
    ("kernel", "dtypes", "detail"),
    [
        (
            bad_attribute,
            ("float32", "float32"),
            "Unknown attribute 'nonexistent_attr' of type float32",
        ),
        (
            complex_into_int,
            ("float32", "int32"),
            "setitem(array(int32, 1d, C), Literal[int](0), complex128)",
        ),
    ],
    ids=["attribute", "complex-into-int"],
)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_kernel_that_does_not_type(kernel, dtypes, detail, jit):
    f = numba_kernel(kernel, S((3,), dtypes[1]))
    f = jax.jit(f) if jit else f
    head = (
        f"kernel '{kernel.__name__}' does not compile for inputs ({dtypes[0]}[1d]) "
        f"and outputs ({dtypes[1]}[1d]):\n"
    )
    pattern = "(?s)^" + re.escape(head) + ".*" + re.escape(detail)
    with pytest.raises(KernelCompileError, match=pattern):
        f(jnp.ones(3, jnp.float32))
    assert issubclass(KernelCompileError, TypeError)


@pytest.mark.parametrize(
    ("aliases", "error", "message"),
    [
        (
            {0: 1},
            ValueError,
            "`input_output_aliases` maps input 0 to output 1, but there are 1 outputs "
            "(valid: 0 to 0)",
        ),
        (
            {0: -1},
            ValueError,
            "`input_output_aliases` maps input 0 to output -1, but there are 1 outputs "
            "(valid: 0 to 0)",
        ),
        (
            [(0, 0)],
            TypeError,
            "`input_output_aliases` must be a dict {input index: output index}, got <class 'list'>",
        ),
        (
            {"x": 0},
            TypeError,
            "`input_output_aliases` input indices must be ints, got 'x'",
        ),
        (
            {0: 0.5},
            TypeError,
            "`input_output_aliases` output indices must be ints, got 0.5",
        ),
        (
            {True: 0},
            TypeError,
            "`input_output_aliases` input indices must be ints, got True",
        ),
        (
            {-1: 0},
            ValueError,
            "`input_output_aliases` input indices must be >= 0, got -1",
        ),
    ],
    ids=[
        "output-too-large",
        "output-negative",
        "list",
        "input-str",
        "output-float",
        "input-bool",
        "input-negative",
    ],
)
def test_aliases_refused_at_wrap(aliases, error, message):
    with pytest.raises(error, match=whole_message(message)):
        numba_kernel(copy, F3, input_output_aliases=aliases)


def test_aliases_several_inputs_to_one_output():
    message = "`input_output_aliases` maps several inputs to one output: {0: 0, 1: 0}"
    with pytest.raises(ValueError, match=whole_message(message)):
        numba_kernel(copy, [F3, F3], input_output_aliases={0: 0, 1: 0})


@pytest.mark.parametrize(
    ("aliases", "x", "message"),
    [
        (
            {1: 0},
            jnp.ones(3, jnp.float32),
            "`input_output_aliases` maps input 1 to output 0, but kernel 'copy' is called "
            "with 1 inputs (valid: 0 to 0)",
        ),
        (
            {0: 0},
            jnp.ones(4, jnp.float32),
            "`input_output_aliases` maps input 0 (float32[4]) to output 0 (float32[3]); "
            "aliased buffers must have the same shape and dtype",
        ),
        (
            {0: 0},
            jnp.ones(3, jnp.int32),
            "`input_output_aliases` maps input 0 (int32[3]) to output 0 (float32[3]); "
            "aliased buffers must have the same shape and dtype",
        ),
    ],
    ids=["input-too-large", "shape", "dtype"],
)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_aliases_refused_at_call(aliases, x, message, jit):
    f = numba_kernel(copy, F3, input_output_aliases=aliases)
    f = jax.jit(f) if jit else f
    with pytest.raises(ValueError, match=whole_message(message)):
        f(x)


def test_aliases_with_no_inputs():
    @numba.njit
    def fill(out):
        out[...] = 1.0

    message = (
        "`input_output_aliases` maps input 0 to output 0, but kernel 'fill' is called "
        "with 0 inputs (valid: none)"
    )
    with pytest.raises(ValueError, match=whole_message(message)):
        numba_kernel(fill, F3, input_output_aliases={0: 0})()


@pytest.mark.parametrize("method", ["bogus", "Sequential", 0])
def test_unknown_vmap_method(method):
    message = (
        "`vmap_method` must be one of None, 'sequential', 'sequential_unrolled', "
        f"'expand_dims', 'broadcast_all', got {method!r}"
    )
    with pytest.raises(ValueError, match=whole_message(message)):
        numba_kernel(copy, F3, vmap_method=method)


@numba.njit
def _add_rows(x, y, out):
    for i in range(x.size):
        out[i] = x[i] + y[i]


def test_symbolic_shapes_are_refused_with_what_to_do():
    # jax.export with a symbolic batch: the handler is compiled per shape.
    import ffi_core

    op = numba_kernel(_add_rows, S((4,), jnp.float32))
    (b,) = jax.export.symbolic_shape("b")
    spec = S((b, 4), jnp.float32)
    message = (
        "numba kernel '_add_rows' cannot be lowered with symbolic shapes: its input 0 has the "
        "shape (b, 4), and its native handler is compiled for concrete shapes. Export (or "
        "lower) it with concrete shapes, once per shape you need"
    )
    with pytest.raises(NotImplementedError, match=whole_message(message)):
        ffi_core.export(jax.jit(jax.vmap(op)))(spec, spec)
