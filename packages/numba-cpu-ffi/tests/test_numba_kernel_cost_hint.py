"""Large calls carry a cost hint: one more operand, a sum over 2,048 elements of
an input, that the handler ignores. XLA's CPU client then runs a program made
of one large kernel call on its worker threads rather than inline on the
calling thread (docs/performance.md says why that matters)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from ffi_core.bridge import HINT_MIN_ELEMENTS
from numba_cpu_ffi import numba_kernel


@numba.njit
def _scale(x, out):
    for i in range(x.size):
        out[i] = 2 * x[i]


@numba.njit
def _fill(out):
    for i in range(out.size):
        out[i] = i


def _operands(fn, *args) -> int:
    """How many operands the kernel's custom call has in the compiled program."""
    text = jax.jit(fn).lower(*args).compile().as_text()
    (call,) = re.findall(r"custom-call\(([^)]*)\)", text)
    return len([operand for operand in call.split(",") if operand.strip()])


@pytest.mark.parametrize(
    ("n", "hinted"), [(16, False), (HINT_MIN_ELEMENTS - 1, False), (HINT_MIN_ELEMENTS, True)]
)
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.int32, jnp.bool_, jnp.complex64])
def test_large_calls_carry_the_hint_and_compute_the_same(n, hinted, dtype):
    x = (jnp.arange(n) % 3).astype(dtype)
    op = numba_kernel(_scale, jax.ShapeDtypeStruct(x.shape, x.dtype))
    assert _operands(op, x) == 1 + hinted
    want = (2 * np.asarray(x)).astype(x.dtype)
    np.testing.assert_array_equal(jax.jit(op)(x), want)
    np.testing.assert_array_equal(op(x), want)  # eager


def test_hint_under_vmap_and_aliases():
    x = jnp.arange(4 * HINT_MIN_ELEMENTS, dtype=jnp.float32).reshape(4, -1)
    row = jax.ShapeDtypeStruct(x.shape[1:], x.dtype)
    vmapped = jax.jit(jax.vmap(numba_kernel(_scale, row)))
    np.testing.assert_array_equal(vmapped(x), 2 * np.asarray(x))
    aliased = jax.jit(numba_kernel(_scale, row, input_output_aliases={0: 0}), donate_argnums=0)
    np.testing.assert_array_equal(aliased(x[0] + 0), 2 * np.asarray(x[0]))


def test_no_hint_without_a_large_input():
    # Only the output is large: there is no input to read the hint from.
    out = jax.ShapeDtypeStruct((HINT_MIN_ELEMENTS,), jnp.int32)
    op = numba_kernel(_fill, out)
    assert _operands(op) == 0
    np.testing.assert_array_equal(jax.jit(op)(), np.arange(HINT_MIN_ELEMENTS))
