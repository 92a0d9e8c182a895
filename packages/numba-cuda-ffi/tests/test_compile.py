"""PTX compilation for a given compute capability, without a GPU, and the
parameter layout the handler packs, checked against the PTX ``.param`` list."""

import re

import numpy as np
import pytest
from ffi_core.bridge.cuda import ptx_entry, ptx_params
from numba import cuda
from numba_cuda_ffi import KernelCompileError
from numba_cuda_ffi._compile import compile_kernel, param_layout
from numba_cuda_ffi._spec import ArraySig, KernelInfo

CC = (9, 0)


@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[()] * x[i] + y[i]


@cuda.jit
def transpose(x, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = x[j, i]


@cuda.jit
def bad(x, out):
    out[0] = x.no_such_attribute


SIGS = [
    (
        axpy,
        (
            ArraySig("float32", 0),
            ArraySig("float32", 1),
            ArraySig("float32", 1),
            ArraySig("float32", 1),
        ),
    ),
    (
        axpy,
        (
            ArraySig("float64", 0),
            ArraySig("float16", 1),
            ArraySig("int32", 1),
            ArraySig("float64", 1),
        ),
    ),
    (transpose, (ArraySig("complex64", 2), ArraySig("complex64", 2))),
    (transpose, (ArraySig("bool", 2), ArraySig("uint8", 2))),
]


@pytest.mark.parametrize(("kernel", "arrays"), SIGS)
def test_ptx_params_match_layout(kernel, arrays):
    compiled = compile_kernel(KernelInfo(kernel), arrays, CC)
    assert compiled.cc == CC
    assert ".target sm_90" in compiled.ptx
    assert compiled.entry == ptx_entry(compiled.ptx)
    assert kernel.py_func.__name__ in compiled.entry
    layout = param_layout(arrays)
    assert len(layout) == sum(5 + 2 * a.rank for a in arrays)
    assert ptx_params(compiled.ptx) == (8,) * len(layout)
    # The params are named in order, _param_0 ... _param_{n-1}.
    names = re.findall(r"\.param \.u64 (\S+?)_param_(\d+)", compiled.ptx)
    assert [int(n) for _, n in names] == list(range(len(layout)))
    # The cubin nvJitLink makes for sm_90 holds the entry.
    assert compiled.image[:4] == b"\x7fELF"
    assert compiled.entry.encode() in compiled.image


def test_layout_order():
    layout = param_layout((ArraySig("float32", 2), ArraySig("int8", 0)))
    assert [(s.array, s.field, s.axis) for s in layout] == [
        (0, "meminfo", -1),
        (0, "parent", -1),
        (0, "nitems", -1),
        (0, "itemsize", -1),
        (0, "data", -1),
        (0, "shape", 0),
        (0, "shape", 1),
        (0, "strides", 0),
        (0, "strides", 1),
        (1, "meminfo", -1),
        (1, "parent", -1),
        (1, "nitems", -1),
        (1, "itemsize", -1),
        (1, "data", -1),
    ]


@pytest.mark.parametrize(("kernel", "arrays"), SIGS)
def test_layout_is_numbas_argument_abi(kernel, arrays):
    # What numba-cuda itself passes to a kernel: each array's data model
    # fields, flattened by the CUDA target's argument packer.
    import numba
    from numba.cuda.descriptor import cuda_target
    from numba_cuda_ffi._compile import ARRAY_FIELDS

    del kernel
    context = cuda_target.target_context
    numba_types = [
        numba.types.Array(numba.from_dtype(np.dtype(a.dtype)), a.rank, "C") for a in arrays
    ]
    expected = []
    for k, t in enumerate(numba_types):
        fields = context.data_model_manager[t]._fields
        assert fields[: len(ARRAY_FIELDS)] == ARRAY_FIELDS
        assert fields[len(ARRAY_FIELDS) :] == ("shape", "strides")
        expected += [(k, f, -1) for f in ARRAY_FIELDS]
        expected += [(k, "shape", d) for d in range(t.ndim)]
        expected += [(k, "strides", d) for d in range(t.ndim)]
    layout = param_layout(arrays)
    assert [(s.array, s.field, s.axis) for s in layout] == expected
    flat = context.get_arg_packer(numba_types).argument_types
    assert len(flat) == len(layout)
    # Pointers where the handler stores addresses, 64-bit integers elsewhere.
    for slot, llvm_type in zip(layout, flat, strict=True):
        is_pointer = slot.field in ("meminfo", "parent", "data")
        assert llvm_type.is_pointer == is_pointer, (slot, llvm_type)
        if not is_pointer:
            assert str(llvm_type) == "i64", (slot, llvm_type)


def test_compile_is_cached():
    info = KernelInfo(transpose)
    arrays = SIGS[2][1]
    assert compile_kernel(info, arrays, CC) is compile_kernel(info, arrays, CC)
    assert compile_kernel(info, arrays, (8, 0)).cc == (8, 0)
    assert ".target sm_80" in compile_kernel(info, arrays, (8, 0)).ptx


def test_compile_error_names_kernel():
    arrays = (ArraySig("float32", 1), ArraySig("float32", 1))
    with pytest.raises(
        KernelCompileError,
        match=r"(?s)^"
        + re.escape("kernel 'bad' does not compile for arrays (float32[1d], float32[1d]):\n")
        + ".*no_such_attribute",
    ):
        compile_kernel(KernelInfo(bad), arrays, CC)
