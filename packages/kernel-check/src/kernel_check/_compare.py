"""Comparing results: per-dtype tolerances, and the first element that differs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

__all__ = ["TOLERANCES", "first_difference", "max_difference", "tolerance"]

#: ``(rtol, atol)`` by dtype name within which two results of one operation
#: (two backends, eager and jit, a reference) must agree; dtypes not named
#: (integers, bool) must agree exactly. The autotuner of kernel-bench holds
#: backends to the same table.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
    "float32": (1e-4, 1e-4),
    "complex64": (1e-4, 1e-4),
    "float64": (1e-9, 1e-9),
    "complex128": (1e-9, 1e-9),
}


def tolerance(
    dtype: Any, overrides: Mapping[str, tuple[float, float]] | None = None
) -> tuple[float, float]:
    """``(rtol, atol)`` for results of ``dtype``: ``overrides`` first, then
    :data:`TOLERANCES`, else exact.

    Example:
        >>> tolerance("float32"), tolerance("int32"), tolerance("float32", {"float32": (0.1, 0)})
        ((0.0001, 0.0001), (0.0, 0.0), (0.1, 0))
    """
    name = np.dtype(dtype).name
    if overrides and name in overrides:
        return overrides[name]
    return TOLERANCES.get(name, (0.0, 0.0))


def max_difference(a: np.ndarray, b: np.ndarray) -> float:
    """The largest absolute difference of two arrays of one shape (complex
    values too), ignoring NaNs; NaN where no element pair has a number.

    Example:
        >>> max_difference(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
        0.5
    """
    with np.errstate(invalid="ignore"):
        diff = np.abs(a.astype(np.complex128) - b.astype(np.complex128))
    return float(np.nanmax(diff)) if diff.size and not np.all(np.isnan(diff)) else np.nan


def _describe(x: np.ndarray) -> str:
    return f"{x.dtype.name}{list(x.shape)}"


def first_difference(
    expected: Any,
    actual: Any,
    *,
    tolerances: Mapping[str, tuple[float, float]] | None = None,
    names: tuple[str, str] = ("expected", "got"),
) -> str | None:
    """None when the pytrees ``expected`` and ``actual`` agree within the
    tolerances of their dtypes, else the first difference in words: which
    output, which element, both values.

    Args:
        expected, actual: pytrees of arrays.
        tolerances: ``{dtype name: (rtol, atol)}`` replacing :data:`TOLERANCES`
            entries.
        names: what to call the two sides in the message.

    Example:
        >>> first_difference([np.zeros(3)], [np.array([0.0, 0.5, 0.0])])
        'output 0 at index (1,): expected 0.0, got 0.5 (1 of 3 elements differ, by up to 0.5; rtol=1e-09, atol=1e-09)'
    """
    # jaxlib declares no type for PyTreeDef; the two compare as the objects they are.
    exp_tree: Any
    tree: Any
    exp_leaves, exp_tree = jax.tree.flatten(expected)
    leaves, tree = jax.tree.flatten(actual)
    if tree != exp_tree:
        return f"the output structure {tree} differs from {exp_tree}"
    for i, (a, b) in enumerate(zip(exp_leaves, leaves, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"output {i} is {_describe(b)}, {names[0]} {_describe(a)}"
        rtol, atol = tolerance(a.dtype, tolerances)
        if a.dtype.kind in "biuU":
            close = a == b
        else:
            close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        if not np.all(close):
            index = tuple(int(k) for k in np.argwhere(~close)[0])
            count = int(np.size(close) - np.count_nonzero(close))
            worst = max_difference(a, b) if a.dtype.kind != "b" else 1
            return (
                f"output {i} at index {index}: {names[0]} {a[index].item()!r}, "
                f"{names[1]} {b[index].item()!r} ({count} of {a.size} elements differ, "
                f"by up to {worst:.3g}; rtol={rtol:g}, atol={atol:g})"
            )
    return None
