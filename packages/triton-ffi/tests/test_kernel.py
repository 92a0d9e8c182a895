"""triton_kernel under jit, vmap, scan and aliases, on the GPU emulated on the
CPU: the real compile for sm_90, the real native handler called by XLA, and
each launch run by Triton's interpreter on the pointers the handler packed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
from ffi_core.bridge.cuda.testing import EMULATED_STREAM, EmulatedGPU, emulated_gpu_fixture  # noqa: E402
from ffi_core.testing import raises_exactly  # noqa: E402
from triton_ffi import triton_kernel  # noqa: E402
from triton_ffi.testing import LOWERING, interpreted  # noqa: E402

S = jax.ShapeDtypeStruct


@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    tl.store(out_ptr + i, tl.load(x_ptr + i, mask=mask) + tl.load(y_ptr + i, mask=mask), mask=mask)


@triton.jit
def axpy(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    x = tl.load(x_ptr + i, mask=mask)
    tl.store(out_ptr + i, alpha * x + tl.load(y_ptr + i, mask=mask), mask=mask)


@triton.jit
def row_sum(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    j = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + j, mask=j < cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


def _grid(meta):
    return (triton.cdiv(meta["n"], meta["BLOCK"]),)


# One per process: a registered target keeps the handler built against the
# emulated driver it was first lowered with.
_GPU = interpreted(EmulatedGPU())


gpu = emulated_gpu_fixture(_GPU, [LOWERING])


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("n", [1, 100, 1024, 1500])
def test_add_under_jit(gpu, n):
    op = triton_kernel(add, S((n,), jnp.float32), grid=_grid, BLOCK=256)
    x, y = _rand(n), _rand(n, seed=1)
    out = jax.jit(lambda a, b: op(a, b, n=n))(x, y)
    np.testing.assert_array_equal(out, x + y)
    (grid, block, shared, stream) = gpu.launches[-1]
    assert grid == (-(-n // 256), 1, 1) and block == (128, 1, 1) and stream == EMULATED_STREAM
    assert shared == 0


def test_a_grid_callable_returning_no_ints(gpu):
    op = triton_kernel(add, S((4,), jnp.float32), grid=lambda meta: (meta["n"] / 2,), BLOCK=4)
    x = _rand(4)
    with raises_exactly(
        TypeError,
        "triton kernel 'add': `grid` must return an int or a tuple of 1 to 3 ints (or "
        "`grid` a callable of the meta-parameters returning one), got (2.0,)",
    ):
        jax.jit(lambda a, b: op(a, b, n=4))(x, x)


def test_scalar_values_share_one_handler(gpu):
    n = 300
    op = triton_kernel(axpy, S((n,), jnp.float32), grid=_grid, BLOCK=128)
    x, y = _rand(n), _rand(n, seed=1)
    for alpha in (0.5, 2.0, -3.25):
        np.testing.assert_allclose(op(x, y, alpha=alpha, n=n), alpha * x + y, rtol=1e-6)
    # alpha travels as an attribute: one handler (and one load) for every value.
    names = {name for name, _ in gpu.handlers.values() if "axpy" in name}
    assert len(names) == 1
    assert sum("axpy" in entry for _, entry, *_ in gpu.loaded) == 1


def test_vmap_launches_once_per_element(gpu):
    rows, cols = 5, 40
    op = triton_kernel(row_sum, S((rows,), jnp.float32), grid=rows, BLOCK=64)
    x = _rand(3, rows, cols)
    out = jax.vmap(lambda a: op(a, cols=cols))(x)
    np.testing.assert_allclose(out, x.sum(-1), rtol=1e-5)
    assert len(gpu.launches) == 3


def test_vmap_of_unbatched_input_and_scan(gpu):
    n = 64
    op = triton_kernel(add, S((n,), jnp.float32), grid=_grid, BLOCK=64)
    x, y = _rand(4, n), _rand(n, seed=1)
    np.testing.assert_array_equal(jax.vmap(lambda a: op(a, y, n=n))(x), x + y)

    def step(carry, _):
        return op(carry, y, n=n), None

    out, _ = jax.lax.scan(step, x[0], None, length=3)
    np.testing.assert_allclose(out, x[0] + 3 * y, rtol=1e-6)


def test_aliases(gpu):
    n = 50
    op = triton_kernel(add, S((n,), jnp.float32), grid=_grid, BLOCK=64, input_output_aliases={0: 0})
    x, y = _rand(n), _rand(n, seed=1)
    np.testing.assert_array_equal(jax.jit(lambda a, b: op(a, b, n=n))(x, y), x + y)


def test_errors():
    spec = S((4,), jnp.float32)
    with raises_exactly(
        TypeError, "`kernel` must be a @triton.jit function (triton.JITFunction), got function"
    ):
        triton_kernel(lambda x: x, spec, grid=1)
    with raises_exactly(
        TypeError,
        "triton kernel 'add': missing the value of tl.constexpr parameter(s) ['BLOCK']; pass "
        "them as keywords of triton_kernel, e.g. BLOCK=...",
    ):
        triton_kernel(add, spec, grid=1)
    with raises_exactly(
        TypeError,
        "triton kernel 'add': 'SIZE' is not a tl.constexpr parameter of the kernel; its "
        "tl.constexpr parameters are ['BLOCK']",
    ):
        triton_kernel(add, spec, grid=1, BLOCK=4, SIZE=3)
    with raises_exactly(
        TypeError,
        "triton kernel 'add': `grid` must be an int or a tuple of 1 to 3 ints (or `grid` a "
        "callable of the meta-parameters returning one), got 'big'",
    ):
        triton_kernel(add, spec, grid="big", BLOCK=4)
    with raises_exactly(
        TypeError,
        "triton kernel 'add': `grid` must be an int or a tuple of 1 to 3 ints (or `grid` a "
        "callable of the meta-parameters returning one), got (1, 1, 1, 1)",
    ):
        triton_kernel(add, spec, grid=(1, 1, 1, 1), BLOCK=4)
    for options, error, message in (
        ({"num_warps": 0}, ValueError, "`num_warps` must be at least 1, got 0"),
        ({"num_warps": True}, TypeError, "`num_warps` must be an int, got True"),
        ({"num_stages": "3"}, TypeError, "`num_stages` must be an int, got '3'"),
        (
            {"num_warps": 3},
            ValueError,
            "`num_warps` must be a power of two from 1 to 32 (a block of 32 * num_warps "
            "threads, at most 1024), got 3",
        ),
        (
            {"num_warps": 64},
            ValueError,
            "`num_warps` must be a power of two from 1 to 32 (a block of 32 * num_warps "
            "threads, at most 1024), got 64",
        ),
    ):
        with raises_exactly(error, f"triton kernel 'add': {message}"):
            triton_kernel(add, spec, grid=1, BLOCK=4, **options)
    assert triton_kernel(add, spec, grid=np.int64(2), BLOCK=4) is not None
    op = triton_kernel(add, spec, grid=1, BLOCK=4)
    x = np.zeros(4, np.float32)
    with raises_exactly(
        TypeError,
        "triton kernel 'add': missing scalar parameter(s) ['n']; pass them as keywords of "
        "the call, e.g. op(..., n=...) (the parameters after the first 3 are scalars: 2 input "
        "arrays given and 1 outputs; a pointer among them means an input array is missing)",
    ):
        op(x, x)
    with raises_exactly(
        TypeError,
        "triton kernel 'add' takes 4 parameters that are not tl.constexpr (x_ptr, y_ptr, "
        "out_ptr, n), but got 4 inputs and 1 outputs, 5 pointers",
    ):
        op(x, x, x, x, n=4)
    with raises_exactly(
        TypeError,
        "triton kernel 'add': unexpected keyword(s) ['m']; its scalar parameters (after 3 "
        "pointers) are ['n']",
    ):
        op(x, x, n=4, m=2)
    with raises_exactly(
        TypeError,
        "triton kernel 'add': scalar parameter 'n' must be an int, a float, a bool or a NumPy "
        "scalar, got str",
    ):
        op(x, x, n="4")
    for big in (2**63, -(2**63) - 1):
        with raises_exactly(
            OverflowError,
            f"triton kernel 'add': scalar parameter 'n' is {big}, outside the int64 range that "
            "Triton passes a Python int as; pass a NumPy scalar of the kernel's type (e.g. "
            "numpy.uint64) instead",
        ):
            op(x, x, n=big)
    with pytest.raises(TypeError, match=r"complex64"):
        triton_kernel(add, S((4,), jnp.complex64), grid=1, BLOCK=4)


def test_gpu_op_on_a_machine_without_gpu():
    if jax.devices()[0].platform == "gpu":
        pytest.skip("this machine has a GPU")
    op = triton_kernel(add, S((4,), jnp.float32), grid=1, BLOCK=4)
    x = np.zeros(4, np.float32)
    with raises_exactly(
        RuntimeError,
        "triton kernel 'add' runs on NVIDIA GPUs, but JAX has no CUDA device here; install a "
        'CUDA build of JAX (`uv add "jax[cuda13]"`) on a machine with an NVIDIA GPU and driver',
    ):
        op(x, x, n=4)


# Same text, at the same line, in two modules: Triton's key of a kernel holds
# its line and the values of the tl.constexpr globals it reads.
_KERNELS = """
import triton
import triton.language as tl

SCALE = tl.constexpr({scale})
OFFSET = {offset}


@triton.jit
def helper(x):
    return x * {helper_factor}


@triton.jit
def scaled(x_ptr, out_ptr, n, BLOCK: tl.constexpr, SHIFT: tl.constexpr = OFFSET):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    tl.store(out_ptr + i, helper(tl.load(x_ptr + i, mask=mask) * SCALE) + SHIFT, mask=mask)
"""


def _kernels(tmp_path, name, scale=2, helper_factor=1, offset=0):
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(_KERNELS.format(scale=scale, helper_factor=helper_factor, offset=offset))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "change",
    [{"scale": 3}, {"helper_factor": 5}, {"offset": 7}],
    ids=["global-constexpr", "called-helper", "constexpr-default"],
)
def test_kernels_with_one_text_and_other_dependencies_run_their_own_code(gpu, tmp_path, change):
    n = 4
    x = np.arange(n, dtype=np.float32)
    tag = next(iter(change))
    results = []
    for name, kwargs in ((f"first_{tag}", {}), (f"second_{tag}", change)):
        module = _kernels(tmp_path, name, **kwargs)
        op = triton_kernel(module.scaled, S((n,), jnp.float32), grid=1, BLOCK=4)
        results.append(np.asarray(jax.jit(lambda a, op=op: op(a, n=n))(x)))
    expected = {"scale": 3 * x, "helper_factor": 10 * x, "offset": 2 * x + 7}[tag]
    np.testing.assert_array_equal(results[0], 2 * x)
    np.testing.assert_array_equal(results[1], expected)


def test_a_global_changed_after_the_kernel_was_read_is_refused(tmp_path):
    module = _kernels(tmp_path, "changed")
    triton_kernel(module.scaled, S((4,), jnp.float32), grid=1, BLOCK=4)
    module.SCALE = tl.constexpr(5)
    with raises_exactly(
        RuntimeError,
        "triton kernel 'scaled': global 'SCALE' was constexpr[2] when Triton first read the "
        "kernel and is now constexpr[5]; Triton compiles a kernel against the values it read "
        "first: define the kernel again (run its @triton.jit definition) after changing the "
        "global",
    ):
        triton_kernel(module.scaled, S((4,), jnp.float32), grid=1, BLOCK=4)


def _plain(x):
    return x


@triton.jit
def calls_plain_python(x_ptr):
    tl.store(x_ptr, _plain(1))


def test_a_kernel_triton_cannot_read_is_refused():
    with raises_exactly(
        TypeError,
        "triton kernel 'calls_plain_python': Triton cannot tell what the kernel depends on: "
        f"RuntimeError: Unsupported function referenced: {_plain!r}",
    ):
        triton_kernel(calls_plain_python, S((1,), jnp.float32), grid=1)


def test_a_sharding_rule_launches_on_each_shard(gpu):
    # Four emulated devices, one per CPU device: each launches on its quarter,
    # with n (a callable of the shapes) and the grid of the shard.
    from ffi_core.bridge.cuda.testing import EmulatedDevice
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    devices = jax.devices("cpu")[:4]
    saved = gpu.devices
    gpu.devices = tuple(EmulatedDevice(d.id, d.id) for d in devices)
    try:
        n = 1024
        op = triton_kernel(
            axpy, S((n,), jnp.float32), grid=_grid, BLOCK=64, sharding_rule="elementwise"
        )
        sharded = NamedSharding(Mesh(np.array(devices), ("d",)), P("d"))
        x, y = (jax.device_put(a, sharded) for a in (_rand(n), _rand(n, seed=1)))
        f = jax.jit(lambda a, b: op(a, b, alpha=2.0, n=lambda shapes: shapes[0][0]))
        gpu.launches.clear()
        out = f(x, y)
        np.testing.assert_allclose(out, 2.0 * np.asarray(x) + np.asarray(y), rtol=1e-6)
        assert out.sharding.is_equivalent_to(sharded, 1)
        assert [launch[0] for launch in gpu.launches] == [(n // 4 // 64, 1, 1)] * 4
        assert "all-gather" not in f.lower(x, y).compile().as_text()
    finally:
        gpu.devices = saved
