"""Triton's interpreter on host numpy arrays, without torch and without
``TRITON_INTERPRET``: results equal numpy's, written in place."""

import importlib.abc
import os
import re
import sys

import numpy as np
import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from triton_ffi._interpret import run_interpreted  # noqa: E402

SIZES = [1, 100, 256, 1000, 4096]


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
def row_sums(x, out, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    values = tl.load(x + row * cols + offs, mask=offs < cols, other=0.0)
    tl.store(out + row, tl.sum(values, axis=0) + tl.cdiv(cols, 2))


@pytest.mark.parametrize("n", SIZES)
def test_add(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    run_interpreted(add, (triton.cdiv(n, 256),), [x, y, out, n], {"BLOCK": 256})
    np.testing.assert_array_equal(out, x + y)


def test_add_leaves_memory_past_n_alone():
    x = np.arange(300, dtype=np.int64)
    out = np.full(300, -1, np.int64)
    run_interpreted(add, (2,), [x, x, out, np.int32(257)], {"BLOCK": 256})
    np.testing.assert_array_equal(out[:257], 2 * x[:257])
    assert (out[257:] == -1).all()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize(
    ("dtype", "alpha"),
    [
        (np.float32, 2.5),
        (np.float32, np.float32(-0.75)),
        (np.float64, np.float64(1.0 / 3.0)),
        (np.float16, np.float16(3.0)),
    ],
)
def test_scaled(n, dtype, alpha):
    x = np.linspace(-4, 4, n).astype(dtype)
    out = np.zeros(n, dtype)
    run_interpreted(scaled, (triton.cdiv(n, 128),), [x, out, alpha, n], {"BLOCK": 128})
    expected = (x * np.asarray(alpha, np.float32 if isinstance(alpha, float) else dtype)).astype(
        dtype
    )
    np.testing.assert_allclose(out, expected, rtol=1e-6 if dtype != np.float16 else 1e-3)


def test_scaled_default_constexpr():
    x = np.arange(1000, dtype=np.float32)
    out = np.zeros_like(x)
    run_interpreted(scaled, (4,), [x, out, np.float32(2.0), 1000], {})
    np.testing.assert_array_equal(out, 2 * x)


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (16, 32), (33, 70), (64, 17)])
def test_transpose_2d(rows, cols):
    x = np.arange(rows * cols, dtype=np.int32).reshape(rows, cols)
    out = np.zeros((cols, rows), np.int32)
    grid = (triton.cdiv(rows, 16), triton.cdiv(cols, 32))
    run_interpreted(transpose, grid, [x, out, rows, cols], {"BM": 16, "BN": 32}, num_warps=2)
    np.testing.assert_array_equal(out, x.T)


def test_standard_library_calls():
    x = np.arange(5 * 37, dtype=np.float32).reshape(5, 37)
    out = np.zeros(5, np.float32)
    run_interpreted(row_sums, (5,), [x, out, 37], {"BLOCK": 64})
    np.testing.assert_array_equal(out, x.sum(axis=1) + 19)
    # Calling a @triton.jit function outside a kernel is refused again afterwards.
    with pytest.raises(RuntimeError, match="outside of the scope of a kernel"):
        tl.cdiv(3, 2)


class _TorchImports(importlib.abc.MetaPathFinder):
    """Records (and refuses) every import of torch or a torch module."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            self.asked.append(name)
            raise ModuleNotFoundError(f"No module named {name!r} (refused by the test)")
        return None


def test_no_torch_and_no_environment(monkeypatch):
    # Whether torch is already imported in this process is not the run's doing
    # (on a machine with a GPU and torch installed, Triton's CUDA driver imports
    # it): the run must not import it, so it runs with torch's modules out of
    # sys.modules and every import of one recorded and refused.
    for name in [n for n in sys.modules if n.split(".")[0] == "torch"]:
        monkeypatch.delitem(sys.modules, name)
    imports = _TorchImports()
    monkeypatch.setattr(sys, "meta_path", [imports, *sys.meta_path])
    environ = dict(os.environ)
    x = np.ones(10, np.float32)
    out = np.zeros(10, np.float32)
    run_interpreted(add, (1,), [x, x, out, 10], {"BLOCK": 16})
    np.testing.assert_array_equal(out, 2 * x)
    assert dict(os.environ) == environ
    assert "TRITON_INTERPRET" not in os.environ
    assert imports.asked == []
    assert not [n for n in sys.modules if n.split(".")[0] == "torch"]
    assert isinstance(add, triton.JITFunction)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: run_interpreted(add.fn, (1,), [], {}),
            TypeError,
            "run_interpreted: kernel must be a @triton.jit function (triton.JITFunction), "
            "got function",
        ),
        (
            lambda: run_interpreted(add, 1, [], {}),
            TypeError,
            "run_interpreted: grid must be a tuple of 1 to 3 non-negative ints, got 1",
        ),
        (
            lambda: run_interpreted(add, (1, 1, 1, 1), [], {}),
            TypeError,
            "run_interpreted: grid must be a tuple of 1 to 3 non-negative ints, got (1, 1, 1, 1)",
        ),
        (
            lambda: run_interpreted(add, (1,), [np.zeros(1)], {"BLOCK": 1}),
            TypeError,
            "run_interpreted: kernel 'add' takes 4 arguments that are not tl.constexpr "
            "(['x', 'y', 'out', 'n']), got 1",
        ),
        (
            lambda: run_interpreted(add, (1,), [np.zeros(1)] * 3 + [1], {}),
            ValueError,
            "run_interpreted: constexprs lacks ['BLOCK'], tl.constexpr parameters of kernel "
            "'add' without a default",
        ),
        (
            lambda: run_interpreted(add, (1,), [np.zeros(1)] * 3 + [1], {"BLOCK": 1, "n": 1}),
            ValueError,
            "run_interpreted: constexprs names 'n', which is not a tl.constexpr parameter of "
            "kernel 'add'; its tl.constexpr parameters are ['BLOCK']",
        ),
        (
            lambda: run_interpreted(add, (1,), [np.zeros(1)] * 3 + ["1"], {"BLOCK": 1}),
            TypeError,
            "run_interpreted: argument 'n' must be a numpy array or a scalar, got str",
        ),
        (
            lambda: run_interpreted(add, (1,), [np.zeros(1, np.complex64)] * 3 + [1], {"BLOCK": 1}),
            TypeError,
            "run_interpreted: argument 'x' has dtype complex64, which is not supported; "
            "expected one of bfloat16, bool, float16, float32, float64, int16, int32, int64, "
            "int8, uint16, uint32, uint64, uint8",
        ),
        (
            lambda: run_interpreted(add, (1,), [np.zeros(1)] * 3 + [1], {"BLOCK": 1}, num_warps=6),
            ValueError,
            "run_interpreted: num_warps must be a power of two, got 6",
        ),
    ],
)
def test_argument_errors(call, error, message):
    with pytest.raises(error, match=re.escape(message)) as info:
        call()
    assert str(info.value) == message


def test_a_kernel_compiles_after_an_interpreted_run_that_called_a_helper():
    # tl.sum is a @triton.jit helper: interpreting it once patched
    # triton.language for good, and no kernel compiled afterwards.
    from triton_ffi import compile_triton

    x = np.ones((2, 8), np.float32)
    out = np.zeros(2, np.float32)
    run_interpreted(_row_sum_for_patch_check, (2,), [x, out, 8], {"BLOCK": 8})
    np.testing.assert_array_equal(out, [8.0, 8.0])
    signature = {"x_ptr": "*float32", "out_ptr": "*float32", "cols": "int32"}
    compiled = compile_triton(
        _row_sum_for_patch_check, signature, {"BLOCK": 16}, cc=(8, 0), aligned=False
    )
    assert compiled.pointer_align == 1


@triton.jit
def _row_sum_for_patch_check(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    j = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + j, mask=j < cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))
