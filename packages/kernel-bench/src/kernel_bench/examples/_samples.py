"""Small sample inputs of each example operation, with a NumPy reference: what
``check_kernel`` checks them on (``kernel-bench check`` and the project's own
tests). Small, so that every check runs in a few seconds."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ._csr import random_csr

__all__ = ["SAMPLES", "Sample"]


@dataclasses.dataclass(frozen=True)
class Sample:
    """The inputs ``check_kernel`` gets for one example operation.

    Attributes:
        args: the inputs.
        kwargs: keywords of the call function (static parameters).
        reference: NumPy on the inputs, giving the right results.
        other_args: the inputs in other sizes (for the compile check).
        skip: rows of the report the example is known not to pass, with why.
    """

    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    reference: Callable[..., Any]
    other_args: tuple[Any, ...]
    skip: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _vectors(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


def _axpy(n: int) -> tuple[Any, ...]:
    x, y = _vectors(n, 0)
    return x, y, np.array([0.5], np.float32)


def _exp_trace(n: int) -> tuple[Any, ...]:
    trace, noise = _vectors(n, 1)
    return np.abs(trace), (noise > 0).astype(np.float32)


def _lif(n: int) -> tuple[Any, ...]:
    rng = np.random.default_rng(2)
    return rng.random(n, dtype=np.float32), (1.5 * rng.random(n)).astype(np.float32)


def _csr(k: int | None, p: float) -> tuple[Any, ...]:
    # A 6 x 5 matrix (the `shape` keyword) with about a fraction p of non-zeros.
    dense = np.random.default_rng(3).standard_normal(5 if k is None else (5, k))
    return (*random_csr(6, 5, p, seed=4), dense.astype(np.float32))


def _dense(data, indices, indptr, shape):
    a = np.zeros(shape, data.dtype)
    for r in range(shape[0]):
        for k in range(indptr[r], indptr[r + 1]):
            a[r, indices[k]] += data[k]
    return a


def _lif_reference(v, i_ext, *, dt=0.1, tau=10.0, v_th=1.0, v_reset=0.0):
    v_new = v + dt / tau * (-v + i_ext)
    spikes = v_new >= v_th
    return np.where(spikes, v_reset, v_new).astype(v.dtype), spikes


SAMPLES: dict[str, Sample] = {
    "axpy": Sample(_axpy(8), {}, lambda x, y, a: a[0] * x + y, _axpy(12)),
    # 258: not a multiple of a vector width (a kernel's tail is checked too), and even
    # (the sharding check splits it over two devices).
    "exp_trace": Sample(
        _exp_trace(258),
        {"dt": 0.5, "tau": 4.0},
        lambda trace, spikes: trace * np.exp(np.float32(-0.5 / 4.0)) + spikes,
        _exp_trace(300),
    ),
    "lif_step": Sample(_lif(8), {}, _lif_reference, _lif(12)),
    "csr_matvec": Sample(
        _csr(None, 0.4),
        {"shape": (6, 5)},
        lambda d, i, p, v: _dense(d, i, p, (6, 5)) @ v,
        _csr(None, 0.7),
    ),
    "csr_matmat": Sample(
        _csr(3, 0.4),
        {"shape": (6, 5)},
        lambda d, i, p, b: _dense(d, i, p, (6, 5)) @ b,
        _csr(3, 0.7),
    ),
}
