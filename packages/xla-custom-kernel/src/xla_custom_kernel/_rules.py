"""A kernel's transformation rules: batching, JVP and transpose.

``Rules`` holds what the user registered and gives the primitive its rules.
User rules run with the backend of the call being transformed forced, so the
kernel calls they make use it too; a rule that takes a ``backend`` keyword (by
name or ``**kwargs``) gets it, as the seed's rules do. Without a user batching
rule (or for a call that is already batched) the default rule adds a batch
level, resolved at lowering (``_transforms``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jax import core as jax_core

from . import _autodiff
from ._primitive import out_structs, user_outs
from ._registry import registered_kernels
from ._selection import current_forced, forced_backend
from ._transforms import move_batch_axes

__all__ = ["Rules", "general_batching_rule"]


class Rules:
    """The transformation rules of kernel ``kernel`` (a callable ``XLACustomKernel``
    with ``name`` and ``primitive``)."""

    def __init__(self, kernel: Any) -> None:
        self._kernel = kernel
        self.jvp: _autodiff.JVP | None = None
        self.transpose: Callable[..., Any] | None = None
        self.batching: Callable[..., Any] | None = None

    def general_batching_rule(
        self, args: Sequence[Any], dims: Sequence[int | None], **params: Any
    ) -> tuple[list[Any], list[int]]:
        size, moved, mask = move_batch_axes(args, dims)
        params = {**params, "batch": ((size, mask), *params["batch"])}
        outs = self._kernel.primitive.bind(*moved, **params)
        return list(outs), [0] * len(outs)

    def batching_rule(self, args, dims, **params):
        self._kernel.check_current()
        if self.batching is None or params["batch"]:
            return self.general_batching_rule(args, dims, **params)
        with forced_backend(params["backend"]):
            result = self.batching(
                args,
                dims,
                outs=user_outs(params["outs"], params["multiple"]),
                **dict(params["static"]),
                **_autodiff.backend_keyword(self.batching, params["backend"]),
            )
        if result is NotImplemented:
            return self.general_batching_rule(args, dims, **params)
        return result

    def jvp_rule(self, primals, tangents, *, outs, multiple, static, backend, batch, sharding=None):
        # The tangent and transposed calls are the ones the rules make: each
        # follows its own kernel's sharding rule, not this call's.
        del sharding
        self._kernel.check_current()
        if self.jvp is None:
            raise NotImplementedError(
                f"kernel {self._kernel.name!r} has no JVP rule, so it cannot be differentiated; "
                "define one with def_jvp_rule or def_jvp_rule2 (or use "
                "jax.custom_jvp/custom_vjp around the call)"
            )
        with forced_backend(backend):
            return self.jvp.apply(
                self._kernel,
                primals,
                tangents,
                user_outs(outs, multiple),
                outs,
                dict(static),
                batch,
                backend,
            )

    def transpose_rule(self, cts, *args, outs, multiple, static, backend, batch, sharding=None):
        del sharding
        self._kernel.check_current()
        if self.transpose is None:
            raise NotImplementedError(
                f"kernel {self._kernel.name!r} has no transpose rule, so it cannot be used in "
                "reverse mode (jax.grad, jax.vjp, jax.linear_transpose); define one with "
                "def_transpose_rule"
            )
        with forced_backend(backend):
            return _autodiff.transpose(
                self._kernel,
                self.transpose,
                cts,
                args,
                user_outs(outs, multiple),
                outs,
                dict(static),
                batch,
                backend,
            )


def general_batching_rule(
    kernel: Any,
    args: Sequence[Any],
    axes: Sequence[int | None],
    *,
    outs: Any,
    backend: str | None = None,
    **static: Any,
) -> tuple[list[Any], list[int]]:
    """The default batching of ``kernel`` (an XLACustomKernel or its primitive),
    callable from a batching rule of your own with the arguments it gets.

    In a rule ``def rule(args, dims, *, outs, **kwargs)`` registered with
    ``def_batching_rule``, ``return general_batching_rule(op, args, dims,
    outs=outs, **kwargs)`` batches as if no rule were registered (as returning
    ``NotImplemented`` does). ``backend`` (the keyword the rule got) picks the
    backend of the batched call; None: the one of the call being batched.
    """
    for candidate in registered_kernels().values():
        if kernel is candidate or kernel is candidate.primitive:
            if backend is not None:
                candidate._table.check_known(backend)
            structs, multiple, _ = out_structs(outs)
            return candidate.general_batching_rule(
                args,
                axes,
                outs=tuple(jax_core.ShapedArray(o.shape, o.dtype) for o in structs),
                multiple=multiple,
                static=tuple(sorted(static.items())),
                backend=current_forced() if backend is None else backend,
                batch=(),
            )
    raise TypeError(f"`kernel` must be an XLACustomKernel or the primitive of one, got {kernel!r}")
