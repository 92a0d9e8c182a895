"""load_cuda_inline kernels under jit and vmap on the GPU emulated on the CPU:
the real NVRTC compile for sm_90, the declared layout checked against the
compiled entry, the real native handler called by XLA; each launch runs a
NumPy stand-in of the kernel on the pointers and scalars the handler packed."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cuda_source_ffi import compile_source, load_cuda_file, load_cuda_inline
from cuda_source_ffi._nvrtc import _library
from ffi_core.bridge.cuda import cuda_launch_cpu_lowering, cuda_launch_lowering, cuda_launch_p
from ffi_core.bridge.cuda.testing import EmulatedGPU, emulated_gpu_fixture
from ffi_core.testing import raises_exactly

try:
    _library()
except ImportError as exc:  # pragma: no cover - NVRTC is in the workspace
    pytest.skip(str(exc), allow_module_level=True)

S = jax.ShapeDtypeStruct
AXPY = """
extern "C" __global__ void axpy(const float* x, const float* y, float* out, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"""
LOWERING = (cuda_launch_p, cuda_launch_lowering, cuda_launch_cpu_lowering)


def _axpy_stand_in(launch):
    n = int(launch.value(4, "int32"))
    threads = launch.grid[0] * launch.block[0]
    assert threads >= n
    x, y = launch.array(0, np.float32, (n,)), launch.array(1, np.float32, (n,))
    out = launch.array(2, np.float32, (n,))
    out[:] = launch.value(3, "float32") * x + y


#: The factor each compiled image of SCALE multiplies by, as the test compiled it.
_SCALE_IMAGES: dict[bytes, float] = {}


def _scale_stand_in(entry, image):
    if entry != "scale" or image not in _SCALE_IMAGES:
        return None
    factor = _SCALE_IMAGES[image]

    def run(launch):
        n = int(launch.value(2, "int32"))
        out = launch.array(1, np.float32, (n,))
        out[:] = factor * launch.array(0, np.float32, (n,))

    return (8, 8, 4), run


_GPU = EmulatedGPU()  # one per process (see EmulatedGPU)
_GPU.define("axpy", (8, 8, 8, 4, 4), _axpy_stand_in)
_GPU.add_stand_ins(_scale_stand_in)


gpu = emulated_gpu_fixture(_GPU, [LOWERING])


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_axpy_under_jit_and_vmap(gpu):
    module = load_cuda_inline(AXPY, kernels={"axpy": ["in", "in", "out", "a:float32", "n:int32"]})
    n = 1000
    op = module.kernel("axpy", S((n,), jnp.float32), launch_dims=n)
    x, y = _rand(n), _rand(n, seed=1)
    for a in (0.5, -2.0):
        out = jax.jit(lambda u, v, a=a: op(u, v, a=a, n=n))(x, y)
        np.testing.assert_allclose(out, a * x + y, rtol=1e-6)
    assert gpu.launches[-1][:2] == ((4, 1, 1), (256, 1, 1))
    xs = _rand(3, n, seed=2)
    out = jax.vmap(lambda u: op(u, y, a=1.5, n=n))(xs)
    np.testing.assert_allclose(out, 1.5 * xs + y, rtol=1e-6)


def test_load_cuda_file(gpu, tmp_path):
    path = tmp_path / "axpy.cu"
    path.write_text(AXPY)
    module = load_cuda_file(path, kernels={"axpy": ["in", "in", "out", "a:float32", "n:int32"]})
    assert module.name == "axpy.cu"
    op = module.kernel("axpy", S((8,), jnp.float32), grid=1, block=8)
    x = _rand(8)
    np.testing.assert_allclose(op(x, x, a=1.0, n=8), 2 * x, rtol=1e-6)


# The parameter list behind a macro: the types cannot be read from the source.
AXPY_MACRO = """
#define AXPY_PARAMS const float* x, const float* y, float* out, float a, int n
extern "C" __global__ void axpy(AXPY_PARAMS) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"""


def test_declared_layout_checked_against_the_compiled_entry(gpu):
    # Declared with n as int64: 8 bytes where the compiled entry has 4.
    module = load_cuda_inline(
        AXPY_MACRO, kernels={"axpy": ["in", "in", "out", "a:float32", "n:int64"]}
    )
    op = module.kernel("axpy", S((8,), jnp.float32), grid=1, block=8)
    with pytest.raises(
        TypeError,
        match=re.escape(
            "CUDA kernel 'axpy' of 'inline.cu' is declared with parameters (in, in, out, "
            "a:float32, n:int64) of sizes (8, 8, 8, 4, 8) bytes, but its compiled entry takes "
            "5 parameters of sizes (8, 8, 8, 4, 4)"
        ),
    ):
        op(_rand(8), _rand(8), a=1.0, n=8)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"options": None}, TypeError, "`options` must be a sequence of str, got None"),
        ({"options": "-DX=1"}, TypeError, "`options` must be a sequence of str, got '-DX=1'"),
        (
            {"name": None},
            TypeError,
            "`name` must be a non-empty str (the source's file name), got None",
        ),
        (
            {"kernels": {1: ["in"]}},
            TypeError,
            "`kernels` must map kernel names (non-empty str) to parameter lists, got the names [1]",
        ),
        (
            {"kernels": {"axpy": ["in", "in", "out", "n:float32", "n:int32"]}},
            ValueError,
            "kernel 'axpy' declares the scalar parameter 'n' twice; each scalar is passed by its name",
        ),
    ],
)
def test_load_refuses(kwargs, error, message):
    args = {"kernels": {"axpy": ["in", "in", "out", "a:float32", "n:int32"]}} | kwargs
    with raises_exactly(error, message):
        load_cuda_inline(AXPY, **args)


def test_options_as_a_generator_are_refused_not_dropped():
    with pytest.raises(
        TypeError, match=re.escape("`options` must be a sequence of str, got <generator")
    ):
        load_cuda_inline(AXPY, kernels={"axpy": ["in"]}, options=(o for o in ["-DX=1"]))


def test_load_cuda_file_refuses_what_is_no_path(tmp_path):
    with raises_exactly(TypeError, "`path` must be a str or os.PathLike naming a file, got 0"):
        load_cuda_file(0, kernels={"axpy": ["in"]})
    latin = tmp_path / "latin.cu"
    latin.write_bytes(b"// caf\xe9\n")
    with pytest.raises(ValueError, match=re.escape(f"`path` {str(latin)!r} is not UTF-8 text: ")):
        load_cuda_file(latin, kernels={"axpy": ["in"]})


def test_errors():
    good = {"axpy": ["in", "in", "out", "a:float32", "n:int32"]}
    with raises_exactly(TypeError, "`source` must be a str of CUDA C++, got bytes"):
        load_cuda_inline(b"x", kernels=good)
    with raises_exactly(
        ValueError,
        "parameter 'n:complex64' of kernel 'axpy' must be 'in', 'out' or 'name:dtype' with "
        "dtype one of bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, "
        "float16, float32, float64",
    ):
        load_cuda_inline(AXPY, kernels={"axpy": ["in", "n:complex64"]})
    module = load_cuda_inline(AXPY, kernels=good)
    with raises_exactly(
        KeyError,
        "\"'scale' is not a kernel declared in `kernels` of 'inline.cu'; declared: ['axpy']\"",
    ):
        module.kernel("scale", S((8,), jnp.float32), grid=1, block=8)
    with raises_exactly(
        ValueError,
        "CUDA kernel 'axpy' of 'inline.cu' declares 1 output pointers ('out'), but `outs` has 2",
    ):
        module.kernel("axpy", [S((8,), jnp.float32)] * 2, grid=1, block=8)
    with raises_exactly(
        TypeError, "`grid` must be an int or a tuple of 1 to 3 ints, got <class 'str'>"
    ):
        module.kernel("axpy", S((8,), jnp.float32), grid="x", block=8)
    op = module.kernel("axpy", S((8,), jnp.float32), grid=1, block=8)
    x = _rand(8)
    with raises_exactly(
        TypeError, "CUDA kernel 'axpy' of 'inline.cu' takes 2 inputs (its 'in' parameters), got 1"
    ):
        op(x, a=1.0, n=8)
    with raises_exactly(
        TypeError,
        "CUDA kernel 'axpy' of 'inline.cu' takes the scalar keywords ['a', 'n']; missing ['n']",
    ):
        op(x, x, a=1.0)
    with raises_exactly(
        TypeError,
        "CUDA kernel 'axpy' of 'inline.cu': scalar 'a' (float32) must be a number, got '1'",
    ):
        op(x, x, a="1", n=8)


def test_gpu_op_on_a_machine_without_gpu():
    if jax.devices()[0].platform == "gpu":
        pytest.skip("this machine has a GPU")
    module = load_cuda_inline(AXPY, kernels={"axpy": ["in", "in", "out", "a:float32", "n:int32"]})
    op = module.kernel("axpy", S((8,), jnp.float32), grid=1, block=8)
    x = _rand(8)
    with raises_exactly(
        RuntimeError,
        "CUDA kernel 'axpy' of 'inline.cu' runs on NVIDIA GPUs, but JAX has no CUDA device "
        'here; install a CUDA build of JAX (`uv add "jax[cuda13]"`) on a machine with an '
        "NVIDIA GPU and driver",
    ):
        op(x, x, a=1.0, n=8)


SCALE = """
#include "factor.cuh"
extern "C" __global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = FACTOR * x[i];
}
"""


def _scale_op(module, factor, n):
    image = compile_source(
        module.source, name=module.name, kernels=("scale",), arch=_GPU.cc, options=module.options
    ).cubin
    _SCALE_IMAGES[image] = factor
    return module.kernel("scale", S((n,), jnp.float32), launch_dims=n)


@pytest.mark.parametrize("change", ["header", "options"])
def test_modules_with_one_source_and_other_compiled_code_run_their_own(gpu, tmp_path, change):
    # The same source text and kernel name: what the compile reads besides
    # decides the code, and so the target.
    include = tmp_path / "include"
    include.mkdir()
    header = include / "factor.cuh"
    n = 4
    x = np.arange(n, dtype=np.float32)
    results = []
    for factor in (2, 3):
        if change == "header":
            header.write_text(f"#define FACTOR {factor}.0f\n")
            options = [f"-I{include}"]
        else:
            header.write_text("")
            options = [f"-I{include}", f"-DFACTOR={factor}.0f"]
        module = load_cuda_inline(
            SCALE, kernels={"scale": ["in", "out", "n:int32"]}, options=options
        )
        op = _scale_op(module, factor, n)
        results.append(np.asarray(jax.jit(lambda a, op=op: op(a, n=n))(x)))
    np.testing.assert_array_equal(results[0], 2 * x)
    np.testing.assert_array_equal(results[1], 3 * x)


def test_the_digest_covers_source_name_options_and_headers(tmp_path):
    kernels = {"axpy": ["in", "in", "out", "a:float32", "n:int32"]}
    base = load_cuda_inline(AXPY, kernels=kernels)
    assert load_cuda_inline(AXPY, kernels=kernels).digest == base.digest
    assert load_cuda_inline(AXPY + "\n", kernels=kernels).digest != base.digest
    assert load_cuda_inline(AXPY, kernels=kernels, name="other.cu").digest != base.digest
    assert load_cuda_inline(AXPY, kernels=kernels, options=["-lineinfo"]).digest != base.digest
    header = tmp_path / "h.cuh"
    header.write_text("// one\n")
    source = '#include "h.cuh"\n' + AXPY
    first = load_cuda_inline(source, kernels=kernels, options=[f"-I{tmp_path}"]).digest
    header.write_text("// two\n")
    assert load_cuda_inline(source, kernels=kernels, options=[f"-I{tmp_path}"]).digest != first


TYPED = """
extern "C" __global__ void mix(const float* __restrict__ x, const int* idx, double* out,
                               unsigned long long k, bool flag, int n) {}
"""
MIX = ["in", "in", "out", "k:uint64", "flag:bool", "n:int32"]


def test_types_are_read_from_the_source():
    module = load_cuda_inline(TYPED, kernels={"mix": MIX})
    assert module.array_dtypes == {"mix": ("float32", "int32", "float64")}
    assert module.kernels["mix"] == (
        ("in", ""), ("in", ""), ("out", ""), ("uint64", "k"), ("bool", "flag"), ("int32", "n"),
    )  # fmt: skip
    unread = load_cuda_inline(
        AXPY_MACRO, kernels={"axpy": ["in:float32", "in", "out", "a:float32", "n:int32"]}
    )
    assert unread.array_dtypes == {"axpy": ("float32", "", "")}


def test_declarations_are_read_only():
    # What the module compiles and checks against cannot drift from what it shows.
    module = load_cuda_inline(TYPED, kernels={"mix": MIX})
    with pytest.raises(TypeError):
        module.kernels["mix"] = (("in", ""),)  # type: ignore[index]
    with pytest.raises(TypeError):
        module.array_dtypes["mix"] = ("float64",)  # type: ignore[index]
    with pytest.raises(AttributeError):
        module.kernels = {}  # type: ignore[misc]


def test_arrays_of_another_dtype_are_refused(gpu):
    module = load_cuda_inline(AXPY, kernels={"axpy": ["in", "in", "out", "a:float32", "n:int32"]})
    op = module.kernel("axpy", S((4,), jnp.float32), grid=1, block=4)
    x = _rand(4)
    with raises_exactly(
        TypeError,
        "CUDA kernel 'axpy' of 'inline.cu': input 1 (parameter 1 'y') is declared float32, got "
        "an array of int32",
    ):
        op(x, np.arange(4, dtype=np.int32), a=1.0, n=4)
    with raises_exactly(
        TypeError,
        "CUDA kernel 'axpy' of 'inline.cu': output 0 (parameter 2 'out') is declared float32, "
        "but `outs` gives int32",
    ):
        module.kernel("axpy", S((4,), jnp.int32), grid=1, block=4)
    # Declared in the list where the source cannot be read.
    unread = load_cuda_inline(
        AXPY_MACRO, kernels={"axpy": ["in:float32", "in", "out:float32", "a:float32", "n:int32"]}
    )
    op = unread.kernel("axpy", S((4,), jnp.float32), grid=1, block=4)
    with raises_exactly(
        TypeError,
        "CUDA kernel 'axpy' of 'inline.cu': input 0 (parameter 0) is declared float32, got an "
        "array of int32",
    ):
        op(np.arange(4, dtype=np.int32), x, a=1.0, n=4)
    np.testing.assert_allclose(op(x, x, a=2.0, n=4), 3 * x, rtol=1e-6)


def test_declarations_that_contradict_the_source_are_refused():
    for params, message in [
        (
            ["in:int32", "in", "out", "a:float32", "n:int32"],
            "parameter 0 of kernel 'axpy' is declared 'in:int32', but the source declares "
            "`const float* x` (a pointer to float32)",
        ),
        (
            ["in", "in", "out", "a:float64", "n:int32"],
            "parameter 3 of kernel 'axpy' is declared 'a:float64', but the source declares "
            "`float a` (float32)",
        ),
        (
            ["in", "in", "out", "in", "n:int32"],
            "parameter 3 of kernel 'axpy' is declared 'in', but the source declares `float a` "
            "(not a pointer)",
        ),
        (
            ["in", "in", "a:float32", "out", "n:int32"],
            "parameter 2 of kernel 'axpy' is declared 'a:float32', but the source declares "
            "`float* out` (a pointer)",
        ),
    ]:
        with raises_exactly(ValueError, message):
            load_cuda_inline(AXPY, kernels={"axpy": params})
    with raises_exactly(
        ValueError,
        "parameter 'in:float8' of kernel 'axpy' declares the element type of a pointer, which "
        "must be one of bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, "
        "float16, float32, float64, bfloat16, complex64, complex128",
    ):
        load_cuda_inline(AXPY, kernels={"axpy": ["in:float8"]})


def test_scalars_must_fit_their_declared_type(gpu):
    module = load_cuda_inline(TYPED, kernels={"mix": MIX})
    label = "CUDA kernel 'mix' of 'inline.cu': "
    for values, error, message in [
        (
            {"n": 3.9},
            TypeError,
            "scalar 'n' (int32) must be an int, got 3.9 (a float is not truncated)",
        ),
        (
            {"n": np.float32(3)},
            TypeError,
            "scalar 'n' (int32) must be an int, got np.float32(3.0) (a float is not truncated)",
        ),
        (
            {"n": True},
            TypeError,
            "scalar 'n' (int32) must be a number, got the bool True (bools are not taken for "
            "numbers)",
        ),
        ({"flag": 1}, TypeError, "scalar 'flag' (bool) must be a bool (True or False), got 1"),
        (
            {"n": 2**31},
            OverflowError,
            "scalar 'n' (int32) is 2147483648, outside its range [-2147483648, 2147483647]",
        ),
        (
            {"k": -1},
            OverflowError,
            "scalar 'k' (uint64) is -1, outside its range [0, 18446744073709551615]",
        ),
    ]:
        with raises_exactly(error, label + message):
            module.kernel("mix", S((4,), jnp.float64), grid=1, block=4)(
                _rand(4), np.zeros(4, np.int32), **{"k": 1, "flag": False, "n": 4, **values}
            )
    axpy = load_cuda_inline(AXPY, kernels={"axpy": ["in", "in", "out", "a:float32", "n:int32"]})
    op = axpy.kernel("axpy", S((4,), jnp.float32), grid=1, block=4)
    x = _rand(4)
    with raises_exactly(
        OverflowError,
        "CUDA kernel 'axpy' of 'inline.cu': scalar 'a' (float32) is 1e+300, beyond its "
        "largest value 3.40282e+38",
    ):
        op(x, x, a=1e300, n=4)
    with raises_exactly(
        TypeError,
        "CUDA kernel 'axpy' of 'inline.cu': scalar 'a' (float32) must be a number, got "
        "np.complex64(1+0j)",
    ):
        op(x, x, a=np.complex64(1), n=4)
    # An int for a float, a NumPy int of another width in range: taken.
    np.testing.assert_allclose(op(x, x, a=2, n=np.int64(4)), 3 * x, rtol=1e-6)


def test_a_sharding_rule_launches_on_each_shard(gpu):
    # Four emulated devices, one per CPU device; n follows the shard's shape.
    from ffi_core.bridge.cuda.testing import EmulatedDevice
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = jax.devices("cpu")[:4]
    saved = gpu.devices
    gpu.devices = tuple(EmulatedDevice(d.id, d.id) for d in devices)
    try:
        sizes = []

        def stand_in(launch):
            sizes.append(int(launch.value(4, "int32")))
            _axpy_stand_in(launch)

        gpu.define("axpy_sharded", (8, 8, 8, 4, 4), stand_in)
        module = load_cuda_inline(
            AXPY.replace("axpy", "axpy_sharded"),
            kernels={"axpy_sharded": ["in", "in", "out", "a:float32", "n:int32"]},
        )
        n = 1024
        op = module.kernel(
            "axpy_sharded", S((n,), jnp.float32), launch_dims=n, sharding_rule="elementwise"
        )
        sharded = NamedSharding(Mesh(np.array(devices), ("d",)), P("d"))
        x, y = (jax.device_put(a, sharded) for a in (_rand(n), _rand(n, seed=1)))
        f = jax.jit(lambda u, v: op(u, v, a=2.0, n=lambda shapes: shapes[0][0]))
        gpu.launches.clear()
        out = f(x, y)
        np.testing.assert_allclose(out, 2.0 * np.asarray(x) + np.asarray(y), rtol=1e-6)
        assert out.sharding.is_equivalent_to(sharded, 1)
        # Each launch got its quarter's size.
        assert sizes == [n // 4] * 4
        assert len(gpu.launches) == 4
        assert "all-gather" not in f.lower(x, y).compile().as_text()
    finally:
        gpu.devices = saved
