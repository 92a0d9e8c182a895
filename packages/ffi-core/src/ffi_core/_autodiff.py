"""The JVP and transpose rules of a bridge primitive that has no derivative.

Without them ``jax.grad`` of a kernel call stops at JAX's generic
"Differentiation rule for '...' not implemented", which names the primitive
rather than the kernel and says nothing of what to do. These rules name the
kernel and the two ways to give it a derivative.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jax.extend.core import Primitive
from jax.interpreters import ad

__all__ = ["raise_on_differentiation"]

# What a kernel without a derivative needs; the end of both rules' messages.
_FIX = (
    "define the derivative with `XLACustomKernel.def_jvp_rule` (and `def_transpose_rule` "
    "for reverse mode) or wrap the operation in `jax.custom_vjp`/`jax.custom_jvp`"
)


def raise_on_differentiation(
    primitive: Primitive, *, describe: Callable[[Mapping[str, Any]], str]
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
        kernel 'double' has no JVP rule, so jax.grad, jax.jvp and jax.vjp cannot differentiate it; define the derivative with `XLACustomKernel.def_jvp_rule` (and `def_transpose_rule` for reverse mode) or wrap the operation in `jax.custom_vjp`/`jax.custom_jvp`
    """

    def jvp(primals, tangents, **params):
        del primals, tangents
        raise NotImplementedError(
            f"{describe(params)} has no JVP rule, so jax.grad, jax.jvp and jax.vjp cannot "
            f"differentiate it; {_FIX}"
        )

    def transpose(cotangents, *args, **params):
        del cotangents, args
        raise NotImplementedError(
            f"{describe(params)} has no transpose rule, so jax.linear_transpose cannot "
            f"transpose it; {_FIX}"
        )

    ad.primitive_jvps[primitive] = jvp
    ad.primitive_transposes[primitive] = transpose
