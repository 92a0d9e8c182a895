"""Ahead-of-time compilation of ``@triton.jit`` kernels for sm_80 and sm_90 without
a GPU: the entry's parameter layout (checked against the PTX), the cubin, the
launch metadata, the per-process cache, and every argument error."""

import os
import re

import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from ffi_core.bridge.cuda import ptx_entries, ptx_params  # noqa: E402
from triton_ffi._compile import (  # noqa: E402
    DTYPES,
    CompiledTriton,
    TritonCompileError,
    TritonParam,
    _check_against_ptx,
    compile_triton,
)

CCS = [(8, 0), (9, 0)]
SCRATCH = [
    ("global_scratch", "scratch", "", 8, -1),
    ("profile_scratch", "scratch", "", 8, -1),
]
ADD_SIG = {"x": "*float32", "y": "*float32", "out": "*float32", "n": "int32"}


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


@triton.jit
def scaled(x, out, alpha, n, BLOCK: tl.constexpr = 256):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) * alpha, mask=mask)


@triton.jit
def transpose(x, out, rows, cols, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < rows) & (rn[None, :] < cols)
    tile = tl.load(x + rm[:, None] * cols + rn[None, :], mask=mask)
    tl.store(out + rn[None, :] * rows + rm[:, None], tile, mask=mask)


@triton.jit
def copy(x, out, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n), mask=offs < n)


@triton.jit
def scalars(out, a, b, c, d, e, f, g, h, i, j, k, l, m):  # noqa: E741
    total = a.to(tl.float64) + b + c + d + e + f + g + h + i + j + k + l + m
    tl.store(out, total)


@triton.jit
def matmul(a, b, c, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * BN + rn[None, :], acc)


@triton.jit
def descriptor_copy(a, c, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = tl.make_tensor_descriptor(a, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(c, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst.store([tl.program_id(0) * BM, 0], src.load([tl.program_id(0) * BM, 0]))


@triton.jit
def broken(x, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x + offs, offs, mask=offs < n)


def layout(compiled: CompiledTriton) -> list[tuple[str, str, str, int, int]]:
    return [(p.name, p.kind, p.dtype, p.size, p.index) for p in compiled.params]


def assert_matches_ptx(compiled: CompiledTriton) -> None:
    assert compiled.entry in ptx_entries(compiled.ptx)
    plain = re.sub(r"\s+\.ptr(\s+\.global)?(\s+\.align\s+\d+)?", "", compiled.ptx)
    assert ptx_params(plain, compiled.entry) == compiled.param_sizes


@pytest.mark.parametrize("cc", CCS)
def test_add_layout(cc):
    compiled = compile_triton(add, ADD_SIG, {"BLOCK": 1024}, cc=cc)
    assert compiled.name == "add"
    assert compiled.entry == "add"
    assert compiled.cc == cc
    assert layout(compiled) == [
        ("x", "pointer", "float32", 8, 0),
        ("y", "pointer", "float32", 8, 1),
        ("out", "pointer", "float32", 8, 2),
        ("n", "scalar", "int32", 4, 3),
        *SCRATCH,
    ]
    assert compiled.param_sizes == (8, 8, 8, 4, 8, 8)
    assert_matches_ptx(compiled)


@pytest.mark.parametrize("cc", CCS)
def test_ptx_and_cubin(cc):
    compiled = compile_triton(add, ADD_SIG, {"BLOCK": 1024}, cc=cc)
    target = "sm_80" if cc == (8, 0) else "sm_90a"
    assert re.search(rf"^\.target {target}$", compiled.ptx, re.MULTILINE)
    assert re.search(r"\.visible\s+\.entry add\(", compiled.ptx)
    assert compiled.cubin.startswith(b"\x7fELF")
    assert compiled.cubin.count(b"add") >= 1
    assert compiled.num_warps == 4
    assert compiled.num_stages == 3
    assert compiled.block == (128, 1, 1)
    assert compiled.shared_mem == 0
    assert (compiled.num_ctas, compiled.cluster_dims) == (1, (1, 1, 1))
    assert (compiled.global_scratch_size, compiled.profile_scratch_size) == (0, 0)
    assert compiled.pointer_align == 16
    assert ".reqntid 128" in compiled.ptx


@pytest.mark.parametrize("cc", CCS)
def test_scaled_layout(cc):
    sig = {"x": "*float64", "out": "*float64", "alpha": "float64", "n": "int64"}
    compiled = compile_triton(scaled, sig, {}, cc=cc)
    assert layout(compiled) == [
        ("x", "pointer", "float64", 8, 0),
        ("out", "pointer", "float64", 8, 1),
        ("alpha", "scalar", "float64", 8, 2),
        ("n", "scalar", "int64", 8, 3),
        *SCRATCH,
    ]
    sig = {"x": "*float16", "out": "*float16", "alpha": "float32", "n": "int32"}
    compiled = compile_triton(scaled, sig, {"BLOCK": 128}, cc=cc)
    assert compiled.param_sizes == (8, 8, 4, 4, 8, 8)
    assert_matches_ptx(compiled)


@pytest.mark.parametrize("cc", CCS)
def test_2d_layout(cc):
    sig = {"x": "*bfloat16", "out": "*bfloat16", "rows": "int32", "cols": "int32"}
    compiled = compile_triton(transpose, sig, {"BM": 32, "BN": 64}, cc=cc, num_warps=8)
    assert layout(compiled) == [
        ("x", "pointer", "bfloat16", 8, 0),
        ("out", "pointer", "bfloat16", 8, 1),
        ("rows", "scalar", "int32", 4, 2),
        ("cols", "scalar", "int32", 4, 3),
        *SCRATCH,
    ]
    assert compiled.block == (256, 1, 1)
    assert_matches_ptx(compiled)


@pytest.mark.parametrize("cc", CCS)
def test_every_scalar_dtype(cc):
    names = list("abcdefghijklm")
    sig = {"out": "*float64", **dict(zip(names, DTYPES, strict=True))}
    compiled = compile_triton(scalars, sig, {}, cc=cc)
    expected = [("out", "pointer", "float64", 8, 0)]
    expected += [
        (n, "scalar", dtype, DTYPES[dtype][1], i + 1)
        for i, (n, dtype) in enumerate(zip(names, DTYPES, strict=True))
    ]
    assert layout(compiled) == [*expected, *SCRATCH]
    assert compiled.param_sizes[1:14] == (2, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 1)
    assert_matches_ptx(compiled)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_every_pointer_dtype(dtype):
    sig = {"x": f"*{dtype}", "out": f"*{dtype}", "n": "int32"}
    compiled = compile_triton(copy, sig, {"BLOCK": 64}, cc=(8, 0))
    assert layout(compiled)[:2] == [
        ("x", "pointer", dtype, 8, 0),
        ("out", "pointer", dtype, 8, 1),
    ]
    assert_matches_ptx(compiled)


def test_shared_memory_is_reported():
    sig = {"a": "*float16", "b": "*float16", "c": "*float32", "K": "int32"}
    compiled = compile_triton(matmul, sig, {"BM": 128, "BN": 128, "BK": 64}, cc=(9, 0))
    assert compiled.shared_mem > 48 * 1024  # needs the opt-in attribute to launch
    assert ".extern .shared" in compiled.ptx  # dynamic: passed in the launch


def test_global_scratch_is_reported():
    sig = {"a": "*float16", "c": "*float16", "M": "int32", "N": "int32"}
    hopper = compile_triton(descriptor_copy, sig, {"BM": 64, "BN": 64}, cc=(9, 0))
    assert hopper.global_scratch_size > 0
    assert hopper.global_scratch_align > 1
    assert hopper.global_scratch_align & (hopper.global_scratch_align - 1) == 0
    ampere = compile_triton(descriptor_copy, sig, {"BM": 64, "BN": 64}, cc=(8, 0))
    assert ampere.global_scratch_size == 0
    assert layout(hopper) == layout(ampere)


def test_cached_per_process():
    first = compile_triton(add, ADD_SIG, {"BLOCK": 512}, cc=(8, 0))
    reordered = dict(reversed(list(ADD_SIG.items())))
    assert compile_triton(add, reordered, {"BLOCK": 512}, cc=(8, 0)) is first
    assert compile_triton(add, ADD_SIG, {"BLOCK": 256}, cc=(8, 0)) is not first
    assert compile_triton(add, ADD_SIG, {"BLOCK": 512}, cc=(9, 0)) is not first
    assert compile_triton(add, ADD_SIG, {"BLOCK": 512}, cc=(8, 0), num_warps=8) is not first


def test_default_constexpr_is_the_same_compile():
    sig = {"x": "*float32", "out": "*float32", "alpha": "float32", "n": "int32"}
    assert compile_triton(scaled, sig, {}, cc=(8, 0)) is compile_triton(
        scaled, sig, {"BLOCK": 256}, cc=(8, 0)
    )


def test_no_global_state_changes():
    environ = dict(os.environ)
    compile_triton(add, ADD_SIG, {"BLOCK": 128}, cc=(9, 0), num_stages=2)
    assert dict(os.environ) == environ


def test_compile_failure():
    with pytest.raises(TritonCompileError) as info:
        compile_triton(broken, {"x": "*int32", "n": "int32"}, {"BLOCK": 3}, cc=(8, 0))
    cause = info.value.__cause__
    assert cause is not None
    assert str(info.value) == f"Triton could not compile kernel 'broken' for sm_80: {cause}"
    assert "arange's range must be a power of 2" in str(info.value)
    assert isinstance(info.value, TypeError)


def test_ptx_mismatch():
    ptx = ".visible .entry k(\n.param .u64 .ptr .global .align 1 k_param_0,\n.param .u32 k_param_1\n)\n{}"
    params = (
        TritonParam("x", "pointer", "float32", 8, 0),
        TritonParam("n", "scalar", "int64", 8, 1),
    )
    message = (
        "kernel 'k': PTX entry 'k' takes parameters of [8, 4] bytes, "
        "but the declared layout is [('x', 8), ('n', 8)]"
    )
    with pytest.raises(TritonCompileError, match=re.escape(message)):
        _check_against_ptx("k", ptx, "k", params)
    with pytest.raises(
        TritonCompileError, match=re.escape("kernel 'k': the PTX has no entry 'j'; it has ['k']")
    ):
        _check_against_ptx("k", ptx, "j", params)
    _check_against_ptx("k", ptx, "k", (params[0], TritonParam("n", "scalar", "int32", 4, 1)))


ACCEPTED = "bfloat16, bool, float16, float32, float64, int16, int32, int64, int8, uint16, uint32, uint64, uint8"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"signature": {**ADD_SIG, "n": "int128"}},
            TypeError,
            "compile_triton: signature['n'] is 'int128', not a supported type; expected a dtype "
            f"name, with a leading '*' for a pointer, from: {ACCEPTED}",
        ),
        (
            {"signature": {**ADD_SIG, "x": "*fp32"}},
            TypeError,
            "compile_triton: signature['x'] is '*fp32', not a supported type; expected a dtype "
            f"name, with a leading '*' for a pointer, from: {ACCEPTED}",
        ),
        (
            {"signature": {**ADD_SIG, "z": "int32"}},
            ValueError,
            "compile_triton: signature names 'z', which kernel 'add' does not have; "
            "its parameters are ['x', 'y', 'out', 'n', 'BLOCK']",
        ),
        (
            {"signature": {**ADD_SIG, "BLOCK": "int32"}},
            ValueError,
            "compile_triton: 'BLOCK' is a tl.constexpr parameter of kernel 'add'; "
            "give its value in constexprs, not a dtype in signature",
        ),
        (
            {"signature": {"x": "*float32", "out": "*float32"}},
            ValueError,
            "compile_triton: signature lacks ['y', 'n'], parameters of kernel 'add' that are not "
            "tl.constexpr; give each a dtype name such as '*float32' or 'int32'",
        ),
        (
            {"constexprs": {}},
            ValueError,
            "compile_triton: constexprs lacks ['BLOCK'], tl.constexpr parameters of kernel 'add' "
            "without a default",
        ),
        (
            {"constexprs": {"BLOCK": 64, "n": 3}},
            ValueError,
            "compile_triton: constexprs names 'n', which is not a tl.constexpr parameter of "
            "kernel 'add'; its tl.constexpr parameters are ['BLOCK']",
        ),
        (
            {"constexprs": {"BLOCK": [64]}},
            TypeError,
            "compile_triton: constexprs values must be hashable, got {'BLOCK': [64]}",
        ),
        (
            {"signature": [("x", "*float32")]},
            TypeError,
            "compile_triton: signature must be a dict of parameter name -> dtype name, got list",
        ),
        (
            {"constexprs": None},
            TypeError,
            "compile_triton: constexprs must be a dict of parameter name -> value, got NoneType",
        ),
        (
            {"kernel": add.fn},
            TypeError,
            "compile_triton: kernel must be a @triton.jit function (triton.JITFunction), "
            "got function",
        ),
        (
            {"cc": 90},
            TypeError,
            "compile_triton: cc must be a (major, minor) tuple of ints such as (9, 0), got 90",
        ),
        (
            {"cc": (9, 0, 0)},
            TypeError,
            "compile_triton: cc must be a (major, minor) tuple of ints such as (9, 0), "
            "got (9, 0, 0)",
        ),
        (
            {"num_warps": 3},
            ValueError,
            "compile_triton: num_warps must be a power of two, got 3",
        ),
        (
            {"num_stages": 0},
            ValueError,
            "compile_triton: num_stages must be a positive integer, got 0",
        ),
    ],
)
def test_argument_errors(kwargs, error, message):
    arguments = {
        "kernel": add,
        "signature": ADD_SIG,
        "constexprs": {"BLOCK": 64},
        "cc": (8, 0),
        **kwargs,
    }
    kernel = arguments.pop("kernel")
    signature = arguments.pop("signature")
    constexprs = arguments.pop("constexprs")
    with pytest.raises(error, match=re.escape(message)) as info:
        compile_triton(kernel, signature, constexprs, **arguments)
    assert str(info.value) == message
