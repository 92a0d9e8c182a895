"""A kernel's C++ parameter list read from its source: the types PTX loses."""

from __future__ import annotations

import pytest
from cuda_source_ffi._signature import SourceParam, source_params


def _types(source: str, kernel: str):
    params = source_params(source, kernel)
    return None if params is None else [(p.name, p.pointer, p.dtype) for p in params]


@pytest.mark.parametrize(
    ("declaration", "expected"),
    [
        ("const float* __restrict__ x", ("x", True, "float32")),
        ("float *x", ("x", True, "float32")),
        ("const std::int64_t n", ("n", False, "int64")),
        ("unsigned int n", ("n", False, "uint32")),
        ("unsigned long long k", ("k", False, "uint64")),
        ("__half* h", ("h", True, "float16")),
        ("__nv_bfloat16 *b", ("b", True, "bfloat16")),
        ("size_t n", ("n", False, "uint64")),
        ("float2* v", ("v", True, None)),  # read, type unknown: unchecked
        ("void* p", ("p", True, None)),
    ],
)
def test_one_parameter(declaration, expected):
    source = f'extern "C" __global__ void k({declaration}) {{}}'
    assert _types(source, "k") == [expected]


def test_kernel_forms():
    source = """
    // __global__ void k(int wrong)  (a comment is not a declaration)
    template <typename T>
    __global__ void __launch_bounds__(256) scale(T* x, T a, int n);
    namespace ns { __global__ void f(double* x, int n) {} }
    extern "C" __global__ void k(const float* x, /* size */ int n) {}
    """
    assert _types(source, "k") == [("x", True, "float32"), ("n", False, "int32")]
    assert _types(source, "ns::f") == [("x", True, "float64"), ("n", False, "int32")]
    assert _types(source, "scale<float>") == [
        ("x", True, None),
        ("a", False, None),
        ("n", False, "int32"),
    ]
    assert _types(source, "absent") is None
    assert _types("__global__ void z() {}", "z") == []


@pytest.mark.parametrize(
    "source",
    [
        "#define P float* x\n__global__ void k(P) {}",  # behind a macro
        "__global__ void k(float** x) {}",
        "__global__ void k(float (&x)[4]) {}",
        "__global__ void k(int x) {}\n__global__ void k(float x) {}",  # overloads
        "__global__ void k(float* x",  # unbalanced
        "__global__ void k(float*) {}",  # unnamed
    ],
)
def test_what_cannot_be_read_plainly_is_none(source):
    assert source_params(source, "k") is None


def test_a_parameter_keeps_its_text():
    (param,) = source_params("__global__ void k(const  float *  x) {}", "k")
    assert param == SourceParam("x", True, "float32", "const float * x")
