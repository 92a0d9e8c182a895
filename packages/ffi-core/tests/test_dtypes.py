from __future__ import annotations

import re

import ffi_core
import ml_dtypes
import numpy as np
import pytest
from ffi_core import UnsupportedDTypeError
from ffi_core.abi import DataType

SUPPORTED = [
    (DataType.PRED, np.bool_),
    (DataType.S8, np.int8),
    (DataType.S16, np.int16),
    (DataType.S32, np.int32),
    (DataType.S64, np.int64),
    (DataType.U8, np.uint8),
    (DataType.U16, np.uint16),
    (DataType.U32, np.uint32),
    (DataType.U64, np.uint64),
    (DataType.F16, np.float16),
    (DataType.F32, np.float32),
    (DataType.F64, np.float64),
    (DataType.BF16, ml_dtypes.bfloat16),
    (DataType.C64, np.complex64),
    (DataType.C128, np.complex128),
]
SUPPORTED_TEXT = (
    "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, "
    "float64, bfloat16, complex64, complex128"
)
REFUSED_CODES = [
    DataType.INVALID,
    DataType.TOKEN,
    DataType.S1,
    DataType.S2,
    DataType.S4,
    DataType.U1,
    DataType.U2,
    DataType.U4,
    DataType.F8E5M2,
    DataType.F8E3M4,
    DataType.F8E4M3,
    DataType.F8E4M3FN,
    DataType.F8E4M3B11FNUZ,
    DataType.F8E5M2FNUZ,
    DataType.F8E4M3FNUZ,
    DataType.F4E2M1FN,
    DataType.F8E8M0FNU,
]


def test_supported_dtypes_constant() -> None:
    assert ", ".join(ffi_core.abi.SUPPORTED_DTYPES) == SUPPORTED_TEXT
    assert len(ffi_core.abi.SUPPORTED_DTYPES) == len(SUPPORTED)


@pytest.mark.parametrize(("code", "scalar"), SUPPORTED, ids=lambda v: getattr(v, "name", None))
def test_round_trip(code: DataType, scalar: type) -> None:
    dtype = np.dtype(scalar)
    assert ffi_core.abi.dtype_from_code(code) == dtype
    assert ffi_core.abi.dtype_from_code(int(code)) == dtype
    assert ffi_core.abi.code_from_dtype(dtype) == code
    assert ffi_core.abi.code_from_dtype(scalar) == code
    assert ffi_core.abi.code_from_dtype(str(dtype)) == code
    assert type(ffi_core.abi.code_from_dtype(dtype)) is int


@pytest.mark.parametrize("code", REFUSED_CODES, ids=lambda c: c.name)
def test_dtype_from_code_refuses(code: DataType) -> None:
    message = (
        f"FFI dtype code {int(code)} ({code.name}) has no numpy equivalent here; "
        f"supported: {SUPPORTED_TEXT}"
    )
    with pytest.raises(UnsupportedDTypeError, match=re.escape(message)):
        ffi_core.abi.dtype_from_code(code)


@pytest.mark.parametrize("code", [999, -1, 14])
def test_dtype_from_code_refuses_unknown_code(code: int) -> None:
    message = (
        f"FFI dtype code {code} (unknown) has no numpy equivalent here; supported: {SUPPORTED_TEXT}"
    )
    with pytest.raises(UnsupportedDTypeError, match=re.escape(message)):
        ffi_core.abi.dtype_from_code(code)


@pytest.mark.parametrize(
    "dtype",
    [
        np.dtype("U3"),
        np.dtype(object),
        object,
        np.dtype(ml_dtypes.float8_e4m3fn),
        np.dtype(ml_dtypes.int4),
        np.dtype(">f4"),
        np.dtype([("a", np.float32)]),
        "not a dtype",
        3.5,
    ],
    ids=repr,
)
def test_code_from_dtype_refuses(dtype: object) -> None:
    message = f"dtype {dtype!r} has no FFI dtype code here; supported: {SUPPORTED_TEXT}"
    with pytest.raises(UnsupportedDTypeError, match=re.escape(message)):
        ffi_core.abi.code_from_dtype(dtype)


def test_unsupported_dtype_error_is_a_type_error() -> None:
    assert issubclass(UnsupportedDTypeError, TypeError)
