"""The elementwise examples refuse inputs their kernels cannot take, before
anything is traced: a kernel indexing range(x.size) would write past its output."""

from __future__ import annotations

import re

import numpy as np
import pytest
from kernel_bench.examples import axpy, exp_trace, lif_step

V = np.ones(4, np.float32)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: axpy.call(V.astype(np.int32), V, V[:1]),
            TypeError,
            "input 0 (`x`) of axpy must be float32 or float64, got int32",
        ),
        (
            lambda: axpy.call(V, V[None], V[:1]),
            ValueError,
            "input 1 (`y`) of axpy must be a vector (1-d), got shape (1, 4)",
        ),
        (
            lambda: axpy.call(V, V[:3], V[:1]),
            ValueError,
            "input 1 (`y`) of axpy must have the shape of `x`, (4,), got (3,)",
        ),
        (
            lambda: axpy.call(V, V, V[:2]),
            ValueError,
            "input 2 (`a`) of axpy must have shape (1,) and the dtype of `x`, float32, "
            "got float32[2]",
        ),
        (
            lambda: exp_trace.call(V, V.astype(np.float16)),
            TypeError,
            "input 1 (`spikes`) of exp_trace must be float32 or float64, got float16",
        ),
        (
            lambda: lif_step.call(V.reshape(2, 2), V.reshape(2, 2)),
            ValueError,
            "input 0 (`v`) of lif_step must be a vector (1-d), got shape (2, 2)",
        ),
    ],
)
def test_bad_inputs_are_refused(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()
