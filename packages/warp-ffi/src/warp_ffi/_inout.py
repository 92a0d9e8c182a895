"""In-out parameters: arrays a kernel both reads and writes (Warp's
``in_out_argnames``).

An in-out parameter is one of the kernel's inputs; its new value is an
output of the call too, aliased to the input (XLA's
``input_output_aliases``: the output's buffer is the input's, copied first
only where XLA cannot donate it). A call's buffers are then the inputs (the
array parameters before the output-only ones), then the in-out arrays in
parameter order, then the output-only arrays; the kernel sees each in-out
parameter as its output buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ffi_core

from ._spec import CallSig, KernelInfo, Param

__all__ = ["buffer_of_array", "check_in_out", "check_in_out_step", "output_params"]


def check_in_out(info: KernelInfo, names: Any, n_outputs: int) -> tuple[int, ...]:
    """The array indices (in parameter order) of the in-out parameters
    ``names`` of a kernel whose last ``n_outputs`` array parameters are its
    output-only ones (what ``outs`` describes)."""
    if names is None:
        return ()
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise TypeError(
            "`in_out_argnames` must be a sequence of parameter names (a list or tuple of str), "
            f"got {names!r}"
        )
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"`in_out_argnames` must hold parameter names (str), got {name!r}")
    seen = [n for k, n in enumerate(names) if n in names[:k]]
    if seen:
        raise ValueError(f"`in_out_argnames` names parameter {seen[0]!r} twice: {list(names)!r}")
    arrays = [p.name for p in info.arrays]
    n_in = len(arrays) - n_outputs
    for name in names:
        if name not in arrays:
            kind = (
                "a scalar parameter" if name in {p.name for p in info.scalars} else "no parameter"
            )
            raise ValueError(
                f"`in_out_argnames` names {name!r}, but that is {kind} of warp kernel "
                f"'{info.name}'; in-out parameters are among its array inputs "
                f"({', '.join(arrays[:n_in]) or 'none'})"
            )
        if arrays.index(name) >= n_in:
            raise ValueError(
                f"`in_out_argnames` names {name!r}, but `outs` describes it: the last "
                f"{n_outputs} array parameters of warp kernel '{info.name}' "
                f"({', '.join(arrays[n_in:])}) are its output-only ones; an in-out "
                "parameter comes before them, and `outs` describes only the output-only ones"
            )
    return tuple(sorted(arrays.index(name) for name in names))


def buffer_of_array(k: int, n_in: int, in_out: Sequence[int]) -> int:
    """The call's buffer (inputs, then outputs) that array parameter ``k``
    of a forward call sees: an in-out parameter its output."""
    if k in in_out:
        return n_in + list(in_out).index(k)
    if k < n_in:
        return k
    return n_in + len(in_out) + k - n_in


def output_params(info: KernelInfo, n_in: int, in_out: Sequence[int]) -> list[Param]:
    """The kernel's parameter of each output of a forward call."""
    return [info.arrays[k] for k in in_out] + list(info.arrays[n_in:])


def check_in_out_step(info: KernelInfo, sig: CallSig) -> None:
    """Refuse an export step whose in-out indices do not fit the kernel and
    the step's buffers (they choose which buffer a parameter reads)."""
    in_out = sig.in_out
    if sig.backward:  # the adjoint of in-out parameters is refused
        fits = not in_out
    else:
        fits = (
            list(in_out) == sorted(set(in_out))
            and all(k < len(sig.inputs) for k in in_out)
            and len(sig.inputs) + len(sig.outputs) == len(info.arrays) + len(in_out)
        )
    if not fits:
        raise ffi_core.ExportError(
            f"a step of warp kernel '{info.name}' names in-out parameters {list(in_out)} that "
            f"do not fit its {len(info.arrays)} array parameters and the step's "
            f"{len(sig.inputs)} inputs and {len(sig.outputs)} outputs"
        )
