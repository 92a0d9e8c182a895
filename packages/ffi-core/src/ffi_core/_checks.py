"""The checks of a kernel call's arity, aliases, inputs and scalar parameters.

They run in a bridge's public function, before anything is traced or bound;
each names the argument, the value it got and what is accepted.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Collection, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._spec import KernelDTypes, check_dtype

__all__ = [
    "check_aliases",
    "check_arity",
    "check_inputs",
    "check_static_shapes",
    "positional_count",
    "scalar_value",
]


def positional_count(fn: Callable[..., Any]) -> int | None:
    """How many positional arguments ``fn`` takes, or None when any number
    will do (``*args``) or Python cannot read its signature.

    Example:
        >>> positional_count(lambda x, y, out, *, scale=1.0: None)
        3
        >>> positional_count(lambda *arrays: None) is None
        True
    """
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def check_arity(n_params: int | None, n_in: int, n_out: int, *, name: str) -> None:
    """Check that a kernel taking ``n_params`` arguments (from
    ``positional_count``; None accepts any number) can be called with ``n_in``
    inputs and ``n_out`` outputs, as ``kernel(in_1, ..., in_n, out_1, ..., out_m)``.

    Raises:
        TypeError: the counts differ.

    Example:
        >>> check_arity(3, 2, 1, name="kernel 'add'")
        >>> check_arity(3, 1, 1, name="kernel 'add'")
        Traceback (most recent call last):
        TypeError: kernel 'add' takes 3 arguments but is called with 1 inputs and 1 outputs (2 arrays); the convention is kernel(in_1, ..., in_n, out_1, ..., out_m)
    """
    if n_params is not None and n_params != n_in + n_out:
        raise TypeError(
            f"{name} takes {n_params} arguments but is called with {n_in} inputs and "
            f"{n_out} outputs ({n_in + n_out} arrays); the convention is "
            "kernel(in_1, ..., in_n, out_1, ..., out_m)"
        )


def _check_index(what: str, value: Any) -> int:
    # bool is an int to Python, but True as an index is a mistake.
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"`input_output_aliases` {what} indices must be ints, got {value!r}")


def check_aliases(aliases: Any, n_outs: int) -> tuple[tuple[int, int], ...]:
    """``input_output_aliases`` as sorted ``(input, output)`` pairs.

    Everything that does not depend on the inputs is checked here, when a
    kernel is wrapped: the type, negative indices, output indices beyond
    ``n_outs`` and several inputs on one output. The rest (an input index
    beyond the inputs given, a shape or dtype that differs) is checked per
    call by ``check_inputs``.

    Args:
        aliases: ``{input index: output index}``, or None for none.
        n_outs: the number of outputs.

    Raises:
        TypeError: ``aliases`` is not a dict, or an index is not an int.
        ValueError: an index is out of range, or two inputs share an output.

    Example:
        >>> check_aliases({2: 0, 0: 1}, 2)
        ((0, 1), (2, 0))
        >>> check_aliases(None, 1)
        ()
        >>> check_aliases({0: 0, 1: 0}, 1)
        Traceback (most recent call last):
        ValueError: `input_output_aliases` maps several inputs to one output: {0: 0, 1: 0}
    """
    if aliases is None:
        return ()
    if not isinstance(aliases, dict):
        raise TypeError(
            "`input_output_aliases` must be a dict {input index: output index}, "
            f"got {type(aliases)!r}"
        )
    pairs = []
    for key, value in aliases.items():
        i, j = _check_index("input", key), _check_index("output", value)
        if i < 0:
            raise ValueError(f"`input_output_aliases` input indices must be >= 0, got {i}")
        if not 0 <= j < n_outs:
            raise ValueError(
                f"`input_output_aliases` maps input {i} to output {j}, but there are "
                f"{n_outs} outputs (valid: 0 to {n_outs - 1})"
            )
        pairs.append((i, j))
    outputs = [j for _, j in pairs]
    if len(set(outputs)) != len(outputs):
        raise ValueError(f"`input_output_aliases` maps several inputs to one output: {dict(pairs)}")
    return tuple(sorted(pairs))


def check_inputs(
    args: Sequence[Any],
    out_avals: Sequence[Any],
    aliases: Collection[tuple[int, int]],
    *,
    name: str,
    accepted: Sequence[str] | KernelDTypes,
    kind: str | None = None,
) -> None:
    """Check the inputs of one call: arrays of accepted dtypes, and aliased
    pairs (from ``check_aliases``) that exist and match in shape and dtype.

    Args:
        args: the inputs.
        out_avals: the outputs' avals (anything with ``shape`` and ``dtype``).
        aliases: ``(input, output)`` pairs from ``check_aliases``.
        name: what is called, for the messages (``"kernel 'add'"``).
        accepted, kind: as in ``check_dtype``.

    Raises:
        TypeError: an input is not an array, or its dtype is not accepted.
        ValueError: an aliased input is missing or differs from its output.

    Example:
        >>> import numpy as np
        >>> x = np.zeros(3, np.float32)
        >>> check_inputs([x], [x], [(0, 0)], name="kernel 'f'", accepted=("float32",), kind="example")
        >>> check_inputs([x[:2]], [x], [(0, 0)], name="kernel 'f'", accepted=("float32",), kind="example")
        Traceback (most recent call last):
        ValueError: `input_output_aliases` maps input 0 (float32[2]) to output 0 (float32[3]); aliased buffers must have the same shape and dtype
    """
    for i, x in enumerate(args):
        if not isinstance(x, jax.Array | np.ndarray | np.generic):
            raise TypeError(
                f"input {i} of {name} must be an array (jax.Array or numpy.ndarray), "
                f"got {type(x)!r}"
            )
        check_dtype(x.dtype, f"input {i} of {name}", accepted=accepted, kind=kind)
    for i, j in aliases:
        if i >= len(args):
            valid = f"0 to {len(args) - 1}" if args else "none"
            raise ValueError(
                f"`input_output_aliases` maps input {i} to output {j}, but {name} is "
                f"called with {len(args)} inputs (valid: {valid})"
            )
        x, o = args[i], out_avals[j]
        if tuple(x.shape) != tuple(o.shape) or np.dtype(x.dtype) != np.dtype(o.dtype):
            raise ValueError(
                f"`input_output_aliases` maps input {i} ({np.dtype(x.dtype).name}"
                f"{list(x.shape)}) to output {j} ({np.dtype(o.dtype).name}{list(o.shape)}); "
                "aliased buffers must have the same shape and dtype"
            )


def scalar_value(value: Any, dtype: str, where: str) -> np.generic:
    """``value`` as a NumPy scalar of ``dtype``, for a scalar parameter that a
    kernel declares of that type; ``where`` names the parameter in messages
    ("scalar 'n' of CUDA kernel 'axpy'").

    A bool parameter takes a bool; an integer one an int (not a bool, not a
    float: nothing is truncated) within the type's range; a floating-point one
    an int or a float (not a bool) whose size the type holds (infinities and
    NaN pass as they are). NumPy scalars count as their Python kinds. A traced
    or device array is refused: a scalar parameter is static.

    Raises:
        TypeError: a value of the wrong kind.
        OverflowError: a number beyond the type's range.

    Example:
        >>> scalar_value(3, "int32", "scalar 'n'")
        np.int32(3)
        >>> scalar_value(2**40, "int32", "scalar 'n'")
        Traceback (most recent call last):
        OverflowError: scalar 'n' (int32) is 1099511627776, outside its range [-2147483648, 2147483647]
    """
    if isinstance(value, jax.Array | jax.core.Tracer):
        raise TypeError(
            f"{where} ({dtype}) is static: it takes a Python or NumPy number, got a traced or "
            "device array; pass arrays as inputs"
        )
    kind = "f" if dtype == "bfloat16" else np.dtype(dtype).kind
    is_bool = isinstance(value, bool | np.bool_)
    if kind == "b":
        if not is_bool:
            raise TypeError(f"{where} (bool) must be a bool (True or False), got {value!r}")
        return np.bool_(value)
    if is_bool:
        raise TypeError(
            f"{where} ({dtype}) must be a number, got the bool {value!r} (bools are not taken "
            "for numbers)"
        )
    if kind in "iu":
        if not isinstance(value, int | np.integer):
            raise TypeError(
                f"{where} ({dtype}) must be an int, got {value!r} (a float is not truncated)"
            )
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:
            raise OverflowError(
                f"{where} ({dtype}) is {value}, outside its range [{info.min}, {info.max}]"
            )
        return np.dtype(dtype).type(value)
    if not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{where} ({dtype}) must be a number, got {value!r}")
    limit = float(jnp.finfo(dtype).max)
    if np.isfinite(float(value)) and abs(float(value)) > limit:
        raise OverflowError(f"{where} ({dtype}) is {value}, beyond its largest value {limit:g}")
    return jnp.dtype(dtype).type(value)


def check_static_shapes(avals_in: Sequence[Any], avals_out: Sequence[Any], label: str) -> None:
    """Refuse a call with a symbolic dimension (``jax.export`` with
    ``symbolic_shape``): a kernel's native handler is compiled for concrete
    shapes, so a shape-polymorphic lowering is not possible.

    Raises:
        NotImplementedError: naming the buffer, its shape and what to do.
    """
    for what, avals in (("input", avals_in), ("output", avals_out)):
        for k, aval in enumerate(avals):
            shape = getattr(aval, "shape", ())
            if not all(isinstance(d, int | np.integer) for d in shape):
                dims = ", ".join(str(d) for d in shape)
                raise NotImplementedError(
                    f"{label} cannot be lowered with symbolic shapes: its {what} {k} has the "
                    f"shape ({dims}), and its native handler is compiled for concrete "
                    "shapes. Export (or lower) it with concrete shapes, once per shape you need"
                )
