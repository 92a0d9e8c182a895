"""The cost hint: large custom calls made to run on XLA's CPU worker threads.

XLA's CPU client runs a program it estimates at under 1,000 flops inline on
the calling thread, and counts a custom call as -1 flops: a program made of one
large kernel call ran inline, and its output, allocated from the main thread's
heap that the C library trims on every free, was faulted in page by page at
every call (docs/performance.md). A sum over 2,048 elements of an input,
passed to the handler as one more (ignored) float32 operand, makes XLA run such
a program on its worker threads, as it runs its own large operations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import mlir

__all__ = ["HINT_MIN_ELEMENTS", "hint_source", "lower_with_hint"]

#: Calls whose largest buffer has at least this many elements carry a cost hint.
HINT_MIN_ELEMENTS = 2**16
#: Elements the hint sums: XLA's cost analysis counts about one flop each.
_HINT_ELEMENTS = 2048


def hint_source(avals_in: Sequence[Any], avals_out: Sequence[Any]) -> int | None:
    """The input a cost hint is read from, or None: a small call (largest
    buffer under :data:`HINT_MIN_ELEMENTS` elements), or no input large enough
    to read it from.

    Example:
        >>> from jax.core import ShapedArray
        >>> big, small = ShapedArray((2**16,), np.float32), ShapedArray((8,), np.float32)
        >>> hint_source([small, big], [big]), hint_source([small], [small])
        (1, None)
    """
    sizes = [math.prod(a.shape) for a in avals_in]
    if max(sizes + [math.prod(a.shape) for a in avals_out]) < HINT_MIN_ELEMENTS:
        return None
    return next((i for i, n in enumerate(sizes) if n >= _HINT_ELEMENTS), None)


def _hint(x: Any) -> Any:
    flat = x.reshape(-1)[:_HINT_ELEMENTS]
    if jnp.iscomplexobj(flat):
        flat = jnp.real(flat)
    return jnp.sum(flat.astype(jnp.float32))


def lower_with_hint(
    lowering: Callable[..., Any], ctx: Any, operands: Sequence[Any], source: int, **attrs: Any
) -> Any:
    """Lower a custom call (``lowering``, from ``jax.ffi.ffi_lowering``) with
    the cost hint, read from operand ``source``, as its last operand."""
    scalar = jax.core.ShapedArray((), np.float32)
    (hint,) = mlir.lower_fun(lambda x: [_hint(x)], multiple_results=True)(
        ctx.replace(avals_in=[ctx.avals_in[source]], avals_out=[scalar]), operands[source]
    )
    if isinstance(hint, list | tuple):  # one value per result, or a list of one
        (hint,) = hint
    hinted = ctx.replace(avals_in=[*ctx.avals_in, scalar])
    return lowering(hinted, *operands, hint, **attrs)
