"""FFI dtype codes and numpy dtypes, in both directions.

Only dtypes with an unambiguous byte-addressable numpy equivalent are mapped.
Sub-byte (packed) integers, fp8/fp4 formats and tokens are refused: a guess
would hand a kernel bytes in the wrong format.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ._capi import DataType

__all__ = ["SUPPORTED_DTYPES", "UnsupportedDTypeError", "code_from_dtype", "dtype_from_code"]

_CODE_TO_DTYPE: dict[DataType, np.dtype] = {
    DataType.PRED: np.dtype(np.bool_),
    DataType.S8: np.dtype(np.int8),
    DataType.S16: np.dtype(np.int16),
    DataType.S32: np.dtype(np.int32),
    DataType.S64: np.dtype(np.int64),
    DataType.U8: np.dtype(np.uint8),
    DataType.U16: np.dtype(np.uint16),
    DataType.U32: np.dtype(np.uint32),
    DataType.U64: np.dtype(np.uint64),
    DataType.F16: np.dtype(np.float16),
    DataType.F32: np.dtype(np.float32),
    DataType.F64: np.dtype(np.float64),
    DataType.BF16: np.dtype(ml_dtypes.bfloat16),
    DataType.C64: np.dtype(np.complex64),
    DataType.C128: np.dtype(np.complex128),
}
_DTYPE_TO_CODE = {dtype: code for code, dtype in _CODE_TO_DTYPE.items()}

#: The numpy dtypes that have an FFI code, by name.
SUPPORTED_DTYPES: tuple[str, ...] = tuple(str(d) for d in _CODE_TO_DTYPE.values())


class UnsupportedDTypeError(TypeError):
    """A dtype (or FFI dtype code) that this project does not map."""


def dtype_from_code(code: int) -> np.dtype:
    """The numpy dtype of an ``XLA_FFI_DataType`` code.

    Example:
        >>> dtype_from_code(11)
        dtype('float32')
    """
    try:
        return _CODE_TO_DTYPE[DataType(code)]
    except (ValueError, KeyError):
        name = DataType(code).name if code in DataType._value2member_map_ else "unknown"
        raise UnsupportedDTypeError(
            f"FFI dtype code {code} ({name}) has no numpy equivalent here; "
            f"supported: {', '.join(SUPPORTED_DTYPES)}"
        ) from None


def code_from_dtype(dtype: object) -> int:
    """The ``XLA_FFI_DataType`` code of a numpy dtype (or anything
    ``numpy.dtype`` accepts).

    Example:
        >>> code_from_dtype("float32")
        11
    """
    try:
        key = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:
        key = None
    if key is None or key not in _DTYPE_TO_CODE:
        raise UnsupportedDTypeError(
            f"dtype {dtype!r} has no FFI dtype code here; supported: {', '.join(SUPPORTED_DTYPES)}"
        )
    return int(_DTYPE_TO_CODE[key])
