"""The methods of ``XLACustomKernel`` that register its transformation rules:
batching, JVP and transpose (``Rules`` in ``_rules`` holds and applies them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import _autodiff
from ._rules import Rules

__all__ = ["RuleMethods"]


class RuleMethods:
    """Rule registration, mixed into ``XLACustomKernel``."""

    _rules: Rules

    def def_batching_rule(self, fun: Callable[..., Any]) -> Callable[..., Any]:
        """Replace the default batching with ``fun(args, dims, *, outs, **static)``
        returning ``(outputs, out_dims)`` like a JAX batching rule, or
        ``NotImplemented`` to use the default rule for that case.

        Calls of this kernel made inside ``fun`` use the backend of the call
        being batched."""
        if not callable(fun):
            raise TypeError(f"`fun` must be callable, got {type(fun)!r}")
        self._rules.batching = fun
        return fun

    def register_general_batching(self) -> None:
        """Go back to the default batching (:meth:`general_batching_rule`)."""
        self._rules.batching = None

    def general_batching_rule(
        self, args: Sequence[Any], dims: Sequence[int | None], **params: Any
    ) -> tuple[list[Any], list[int]]:
        """The default batching rule: one more batch level on the same primitive,
        resolved at lowering (see the module docs of ``_transforms``)."""
        return self._rules.general_batching_rule(args, dims, **params)

    def def_jvp_rule(self, fun: Callable[..., Any]) -> Callable[..., Any]:
        """Register ``fun(primals, tangents, *, outs, **static)`` returning
        ``(primal_outs, tangent_outs)``; a tangent may be None for zero."""
        if not callable(fun):
            raise TypeError(f"`fun` must be callable, got {type(fun)!r}")
        self._rules.jvp = _autodiff.JVP(full=fun)
        return fun

    def def_jvp_rule2(self, *rules: Callable[..., Any] | None) -> None:
        """One rule per input: ``rule(tangent, *primals, outs, **static)`` returns
        the outputs' tangent(s) from that input.

        ``None``: a zero derivative, as in the seed API (the input does not
        change the outputs, or its derivative is to be ignored): ``jax.grad``
        with respect to it gives zeros. ``xla_custom_kernel.NOT_DIFFERENTIABLE``:
        the input has no derivative the operation can give (indices, a matrix
        whose derivative is not written); differentiating with respect to it
        raises an error naming the input, while the derivatives with respect to
        the other inputs work.

        Example:
            >>> import jax, jax.numpy as jnp
            >>> import xla_custom_kernel as xck
            >>> op = xck.XLACustomKernel("doc_scaled_by")
            >>> _ = op.def_jax_kernel(lambda outs: lambda a, x: a * x)
            >>> op.def_jvp_rule2(xck.NOT_DIFFERENTIABLE, lambda t, a, x, outs: a * t)
            >>> f = lambda a, x: op(a, x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)).sum()
            >>> jax.grad(f, argnums=1)(jnp.full(2, 3.0), jnp.ones(2))
            Array([3., 3.], dtype=float32)
        """
        for r in rules:
            if r is not None and r is not _autodiff.NOT_DIFFERENTIABLE and not callable(r):
                raise TypeError(
                    "JVP rules must be callables, None (a zero derivative) or "
                    f"xla_custom_kernel.NOT_DIFFERENTIABLE, got {type(r)!r}"
                )
        self._rules.jvp = _autodiff.JVP(per_input=tuple(rules))

    def def_transpose_rule(self, fun: Callable[..., Any]) -> Callable[..., Any]:
        """Register ``fun(cts, *args, outs, **static)`` returning one cotangent per
        input (None for inputs that are not linear); linear inputs arrive as
        ``jax.interpreters.ad.UndefinedPrimal``."""
        if not callable(fun):
            raise TypeError(f"`fun` must be callable, got {type(fun)!r}")
        self._rules.transpose = fun
        return fun
