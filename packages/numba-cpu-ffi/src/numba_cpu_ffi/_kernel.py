"""``numba_kernel``: an ``@numba.njit`` kernel as a JAX operation."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax import core as jax_core

from ._primitive import numba_kernel_call_p
from ._spec import VMAP_METHODS, KernelInfo, check_dtype, normalize_outs

__all__ = ["numba_kernel"]


@functools.cache
def _kernel_info(kernel: Any) -> KernelInfo:
    return KernelInfo(kernel)


def _check_aliases(aliases: Any, n_outs: int) -> tuple[tuple[int, int], ...]:
    if aliases is None:
        return ()
    if not isinstance(aliases, dict):
        raise TypeError(
            "`input_output_aliases` must be a dict {input index: output index}, "
            f"got {type(aliases)!r}"
        )
    pairs = []
    for i, j in aliases.items():
        for what, value in (("input", i), ("output", j)):
            try:
                operator.index(value)
            except TypeError:
                raise TypeError(
                    f"`input_output_aliases` {what} indices must be ints, got {value!r}"
                ) from None
        if not 0 <= j < n_outs:
            raise ValueError(
                f"`input_output_aliases` maps input {i} to output {j}, but there are "
                f"{n_outs} outputs (valid: 0 to {n_outs - 1})"
            )
        pairs.append((int(i), int(j)))
    outputs = [j for _, j in pairs]
    if len(set(outputs)) != len(outputs):
        raise ValueError(f"`input_output_aliases` maps several inputs to one output: {dict(pairs)}")
    return tuple(sorted(pairs))


def numba_kernel(
    kernel: Any,
    outs: Any,
    *,
    vmap_method: str | None = None,
    input_output_aliases: dict[int, int] | None = None,
    error_context: str | None = None,
) -> Callable[..., Any]:
    """Wrap an ``@numba.njit`` kernel as a JAX operation.

    The kernel follows the convention ``kernel(in_1, ..., in_n, out_1, ...,
    out_m)``: it reads the inputs, writes every output in place and returns
    nothing. XLA calls a native handler generated for the kernel's dtypes and
    ranks: no Python and no GIL per call, and shapes are read at run time.

    Args:
        kernel: an ``@numba.njit`` function (``parallel=True`` with ``prange`` works).
        outs: the outputs, as a ``jax.ShapeDtypeStruct``, a sequence of them, or a
            pytree (dict, dataclass) of them. The call returns one array, a tuple
            or the same pytree respectively.
        vmap_method: how ``jax.vmap`` runs the kernel. None (default): one native
            call that loops over the batch (in parallel threads unless the kernel
            is itself parallel). ``"sequential"`` / ``"sequential_unrolled"``: one
            kernel call per batch element in an XLA loop. ``"expand_dims"`` /
            ``"broadcast_all"``: the kernel gets the batched arrays (inputs with a
            leading axis of size 1 or the batch size, outputs with the batch
            size) and must handle the extra axis.
        input_output_aliases: ``{input index: output index}``; the output reuses
            the input's buffer (and, under ``jit`` with donation, no copy is
            made). Shapes and dtypes must match.
        error_context: text added, in parentheses, to the messages of errors the
            kernel raises at run time (a library can say which operation and
            backend the kernel serves). It is compiled into the handler.

    Returns:
        A function taking the input arrays and returning the outputs.

    Example:
        >>> import jax, jax.numpy as jnp, numba
        >>> @numba.njit
        ... def add(x, y, out):
        ...     for i in range(x.size):
        ...         out[i] = x[i] + y[i]
        >>> x = jnp.arange(4.0, dtype=jnp.float32)
        >>> f = numba_kernel(add, jax.ShapeDtypeStruct(x.shape, x.dtype))
        >>> jax.jit(f)(x, x)
        Array([0., 2., 4., 6.], dtype=float32)
    """
    info = _kernel_info(kernel)
    out_structs, rebuild = normalize_outs(outs)
    if not out_structs:
        raise ValueError("`outs` must hold at least one jax.ShapeDtypeStruct, got none")
    out_avals = tuple(
        jax_core.ShapedArray(tuple(s.shape), check_dtype(s.dtype, f"`outs` entry {k} ({s})"))
        for k, s in enumerate(out_structs)
    )
    if vmap_method not in VMAP_METHODS:
        raise ValueError(
            f"`vmap_method` must be one of {', '.join(map(repr, VMAP_METHODS))}, "
            f"got {vmap_method!r}"
        )
    aliases = _check_aliases(input_output_aliases, len(out_avals))
    if error_context is not None and not isinstance(error_context, str):
        raise TypeError(f"`error_context` must be a str or None, got {type(error_context)!r}")

    def call(*args: Any) -> Any:
        info.check_arity(len(args), len(out_avals))
        for i, x in enumerate(args):
            if not isinstance(x, jax.Array | np.ndarray | np.generic):
                raise TypeError(
                    f"input {i} of kernel '{info.name}' must be an array (jax.Array or "
                    f"numpy.ndarray), got {type(x)!r}"
                )
            check_dtype(x.dtype, f"input {i} of kernel '{info.name}'")
        for i, j in aliases:
            if not 0 <= i < len(args):
                valid = f"0 to {len(args) - 1}" if args else "none"
                raise ValueError(
                    f"`input_output_aliases` maps input {i} to output {j}, but kernel "
                    f"'{info.name}' is called with {len(args)} inputs (valid: {valid})"
                )
            x, o = args[i], out_avals[j]
            if tuple(x.shape) != o.shape or np.dtype(x.dtype) != o.dtype:
                raise ValueError(
                    f"`input_output_aliases` maps input {i} ({np.dtype(x.dtype).name}"
                    f"{list(x.shape)}) to output {j} ({o.dtype.name}{list(o.shape)}); "
                    "aliased buffers must have the same shape and dtype"
                )
        results = numba_kernel_call_p.bind(
            *args,
            info=info,
            out_avals=out_avals,
            aliases=aliases,
            vmap_method=vmap_method,
            batched=None,
            context=error_context or "",
        )
        return rebuild(tuple(results))

    call.__name__ = info.name
    call.__qualname__ = info.name
    call.__doc__ = f"numba kernel '{info.name}' as a JAX operation."
    return call
