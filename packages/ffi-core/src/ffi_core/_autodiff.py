"""The JVP and transpose rules of a bridge primitive that has no derivative.

Without them ``jax.grad`` of a kernel call stops at JAX's generic
"Differentiation rule for '...' not implemented", which names the primitive
rather than the kernel and says nothing of what to do. These rules name the
kernel and how to give it a derivative: with JAX's ``jax.custom_jvp`` or
``jax.custom_vjp``, and any other way its bridge names (``derivative_fix``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax.numpy as jnp
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from ._jax_compat import def_eager_impl, with_varying_axes
from .sharding._partition import VmappedCall

__all__ = [
    "derivative_fix",
    "nondifferentiable_call",
    "nondifferentiable_call_p",
    "raise_on_differentiation",
]

# JAX's own way to give any function a derivative: the whole of the default
# fix, and the last way of a bridge's.
_JAX_FIX = "wrap the operation in `jax.custom_vjp`/`jax.custom_jvp`"


def derivative_fix(route: str | None = None) -> str:
    """What a kernel without a derivative needs, as the end of the messages
    of ``raise_on_differentiation``: ``route`` (a bridge's own way to define
    a derivative, said after "define the derivative with"), or else JAX's
    ``jax.custom_vjp``/``jax.custom_jvp``.

    A bridge gives its kernels' text as ``KernelInfo(derivative_fix=...)``.

    Example:
        >>> print(derivative_fix())
        define the derivative by wrapping the operation in `jax.custom_vjp`/`jax.custom_jvp`
        >>> print(derivative_fix("`toy.def_jvp`"))
        define the derivative with `toy.def_jvp` or wrap the operation in `jax.custom_vjp`/`jax.custom_jvp`

    Raises:
        TypeError: ``route`` is not None or a non-empty str.
    """
    if route is None:
        return (
            "define the derivative by wrapping the operation in `jax.custom_vjp`/`jax.custom_jvp`"
        )
    if not isinstance(route, str) or not route:
        raise TypeError(f"`route` must be None or a non-empty str, got {route!r}")
    return f"define the derivative with {route} or {_JAX_FIX}"


# The fix of a kernel whose bridge names no other way.
_DEFAULT_FIX = derivative_fix()


def raise_on_differentiation(
    primitive: Primitive,
    *,
    describe: Callable[[Mapping[str, Any]], str],
    fix: Callable[[Mapping[str, Any]], str | None] | None = None,
) -> None:
    """Give ``primitive`` a JVP and a transpose rule that raise
    NotImplementedError naming the kernel and how to give it a derivative.

    ``jax.grad``, ``jax.jvp`` and ``jax.vjp`` reach the JVP rule,
    ``jax.linear_transpose`` the transpose rule. A call whose tangents are all
    zero (differentiating with respect to something else) is not
    differentiated and runs as usual.

    Args:
        primitive: the bridge's primitive.
        describe: the kernel of one call in words (``"numba kernel 'add'"``),
            from that call's parameters.
        fix: what that kernel needs, from the call's parameters (its bridge's
            text, ``derivative_fix(route)``: one primitive may serve several
            bridges); None, or a call for which it returns None: JAX's way
            alone (``derivative_fix()``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from jax.extend.core import Primitive
        >>> double_p = Primitive("ffi_core_doc_double")
        >>> _ = double_p.def_abstract_eval(lambda x, *, name: x)
        >>> raise_on_differentiation(double_p, describe=lambda p: f"kernel {p['name']!r}")
        >>> try:
        ...     jax.jvp(lambda x: double_p.bind(x, name="double"), (1.0,), (1.0,))
        ... except NotImplementedError as exc:
        ...     print(exc)
        kernel 'double' has no JVP rule, so jax.grad, jax.jvp and jax.vjp cannot differentiate it; define the derivative by wrapping the operation in `jax.custom_vjp`/`jax.custom_jvp`
    """

    def fix_of(params: Mapping[str, Any]) -> str:
        text = None if fix is None else fix(params)
        return _DEFAULT_FIX if text is None else text

    def jvp(primals, tangents, **params):
        del primals, tangents
        raise NotImplementedError(
            f"{describe(params)} has no JVP rule, so jax.grad, jax.jvp and jax.vjp cannot "
            f"differentiate it; {fix_of(params)}"
        )

    def transpose(cotangents, *args, **params):
        del cotangents, args
        raise NotImplementedError(
            f"{describe(params)} has no transpose rule, so jax.linear_transpose cannot "
            f"transpose it; {fix_of(params)}"
        )

    ad.primitive_jvps[primitive] = jvp
    ad.primitive_transposes[primitive] = transpose


# -------------------------------------------- calls through another primitive

# A bridge whose call binds a primitive it does not own (``jax.ffi.ffi_call``'s,
# shared by every FFI call in the process) cannot give that primitive rules
# naming its kernel. It binds this one instead: a higher-order primitive
# around the call, lowered to the call itself, whose JVP and transpose rules
# are the ones above.
nondifferentiable_call_p = Primitive("nondifferentiable_call")
nondifferentiable_call_p.multiple_results = True


def nondifferentiable_call(
    call: Callable[..., Sequence[Any]],
    args: Sequence[Any],
    out_avals: Sequence[Any],
    *,
    label: str,
    fix: str | None = None,
) -> list[Any]:
    """``call(out_avals, *args)``, under a primitive whose JVP and transpose
    rules raise NotImplementedError naming ``label`` and ``fix``.

    For a bridge whose call binds a primitive that is not its own (a
    ``jax.ffi.ffi_call``), which would stop ``jax.grad`` with JAX's generic
    "Differentiation rule for 'ffi_call' not implemented". ``jax.vmap`` of it
    vmaps ``call``.

    Args:
        call: makes the call for the output avals it is given (hashable:
            eager calls hit JAX's cache by it).
        args: the inputs.
        out_avals: the outputs' avals.
        label: the kernel in words (``"numba cuda callable 'f'"``).
        fix: what the kernel needs to be differentiated (its bridge's
            ``derivative_fix(route)``); None: JAX's way alone.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> def twice(out_avals, x):
        ...     return [2 * x]
        >>> f = lambda x: nondifferentiable_call(twice, [x], [jax.core.ShapedArray((), "float32")], label="kernel 'twice'")[0]
        >>> f(jnp.float32(1.5))
        Array(3., dtype=float32)
        >>> try:
        ...     jax.grad(f)(jnp.float32(1.5))
        ... except NotImplementedError as exc:
        ...     print(str(exc).split(";")[0])
        kernel 'twice' has no JVP rule, so jax.grad, jax.jvp and jax.vjp cannot differentiate it
    """
    return nondifferentiable_call_p.bind(
        *args, call=call, out_avals=tuple(out_avals), label=label, fix=fix
    )


def _nondifferentiable_call_abstract_eval(*avals, call, out_avals, label, fix):
    del call, label, fix
    return with_varying_axes(out_avals, avals)


def _nondifferentiable_call_lowering(ctx, *operands, call, out_avals, label, fix):
    del label, fix
    return mlir.lower_fun(lambda *a: tuple(call(out_avals, *a)), multiple_results=True)(
        ctx, *operands
    )


def _nondifferentiable_call_batching(args, dims, *, call, out_avals, label, fix):
    size = next(x.shape[d] for x, d in zip(args, dims, strict=True) if d is not None)
    moved = [x if d is None else jnp.moveaxis(x, d, 0) for x, d in zip(args, dims, strict=True)]
    outs = nondifferentiable_call_p.bind(
        *moved,
        call=VmappedCall(call, tuple(d is not None for d in dims)),
        out_avals=tuple(a.update(shape=(size, *a.shape)) for a in out_avals),
        label=label,
        fix=fix,
    )
    return outs, [0] * len(outs)


# The rules of nondifferentiable_call_p, in one place.
def_eager_impl(nondifferentiable_call_p)
nondifferentiable_call_p.def_abstract_eval(_nondifferentiable_call_abstract_eval)
mlir.register_lowering(nondifferentiable_call_p, _nondifferentiable_call_lowering)
batching.primitive_batchers[nondifferentiable_call_p] = _nondifferentiable_call_batching
raise_on_differentiation(
    nondifferentiable_call_p,
    describe=lambda params: params["label"],
    fix=lambda params: params["fix"],
)
