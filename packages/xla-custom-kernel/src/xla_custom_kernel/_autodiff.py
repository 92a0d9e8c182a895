"""JVP and transpose rules of an XLACustomKernel, run on unbatched and batched calls.

User rules are written for one unbatched call. For a call that the default
batching rule batched (see ``_transforms``), they are vmapped over its levels.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad

from ._registry import registered_kernels
from ._transforms import vmap_levels

__all__ = ["JVP", "NOT_DIFFERENTIABLE", "backend_keyword", "defjvp", "transpose"]


class _NotDifferentiable:
    # One instance: the marker of an input without a derivative.
    def __repr__(self) -> str:
        return "xla_custom_kernel.NOT_DIFFERENTIABLE"

    def __reduce__(self) -> str:
        return "NOT_DIFFERENTIABLE"


#: Given to ``def_jvp_rule2`` (or ``defjvp``) in place of an input's rule:
#: the input is not differentiable, and differentiating with respect to it
#: raises an error naming it (``None`` instead means a zero derivative).
NOT_DIFFERENTIABLE: Any = _NotDifferentiable()


@functools.lru_cache(maxsize=1024)
def _takes_backend(rule: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(rule).parameters.values()
    except (TypeError, ValueError):  # no signature to read: pass nothing it may refuse
        return False
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == "backend" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        for p in params
    )


def backend_keyword(rule: Callable[..., Any], backend: str | None) -> dict[str, Any]:
    """``{"backend": backend}`` where ``rule`` takes a ``backend`` keyword (by
    name or ``**kwargs``), as the seed's rules do; ``{}`` for rules that take
    no ``backend``."""
    try:
        takes = _takes_backend(rule)
    except TypeError:  # an unhashable callable: read its signature each time
        takes = _takes_backend.__wrapped__(rule)
    return {"backend": backend} if takes else {}


def _zeros(aval: Any) -> Any:
    return jnp.zeros(aval.shape, aval.dtype)


def as_outputs(value: Any, n: int, what: str) -> list[Any]:
    """``value`` as a list of ``n`` outputs (one bare array when ``n`` is 1)."""
    if n == 1 and not isinstance(value, list | tuple):
        return [value]
    if not isinstance(value, list | tuple) or len(value) != n:
        got = f"{len(value)} values" if isinstance(value, list | tuple) else repr(type(value))
        raise ValueError(f"{what} must give {n} values (one per output), got {got}")
    return list(value)


def _inner_aval(aval: Any, batch: Sequence[Any], i: int) -> Any:
    n = sum(1 for _, mask in batch if mask[i])
    return aval.update(shape=aval.shape[n:])


@dataclasses.dataclass(frozen=True)
class JVP:
    """A full rule ``full(primals, tangents, **kw)``, or one rule per input."""

    full: Callable[..., Any] | None = None
    per_input: tuple[Callable[..., Any] | None, ...] | None = None

    def check_arity(self, name: str, n_inputs: int) -> None:
        if self.per_input is not None and len(self.per_input) != n_inputs:
            raise ValueError(
                f"kernel {name!r} has {len(self.per_input)} JVP rules (def_jvp_rule2) but is called "
                f"with {n_inputs} inputs; give exactly one rule per input, None where the "
                "derivative is zero"
            )

    def _unbatched(
        self, kernel: Any, primals, tangents, outs, kw, backend
    ) -> tuple[list[Any], list[Any]]:
        """Primal and tangent outputs of one unbatched call; tangents may hold None."""
        n_out = len(outs) if isinstance(outs, tuple) else 1
        if self.full is not None:
            result = self.full(
                list(primals),
                list(tangents),
                outs=outs,
                **kw,
                **backend_keyword(self.full, backend),
            )
            if not isinstance(result, list | tuple) or len(result) != 2:
                raise ValueError(
                    f"the JVP rule of kernel {kernel.name!r} must return (primal_outs, tangent_outs), "
                    f"got {type(result)!r}"
                )
            p_out = as_outputs(
                result[0], n_out, f"the JVP rule of {kernel.name!r} (primal outputs)"
            )
            t_out = as_outputs(
                result[1], n_out, f"the JVP rule of {kernel.name!r} (tangent outputs)"
            )
            return p_out, t_out
        # Called only for a kernel with JVP rules: without `full`, there are per-input ones.
        assert self.per_input is not None
        self.check_arity(kernel.name, len(primals))
        p_out = as_outputs(kernel(*primals, outs=outs, **kw), n_out, "the kernel")
        total: list[Any] = [None] * n_out
        for k, (rule, t) in enumerate(zip(self.per_input, tangents, strict=True)):
            if rule is None or t is None:
                continue
            if rule is NOT_DIFFERENTIABLE:
                raise _not_differentiable(kernel, k, primals[k])
            contrib = as_outputs(
                rule(t, *primals, outs=outs, **kw, **backend_keyword(rule, backend)),
                n_out,
                f"JVP rule {k} of {kernel.name!r}",
            )
            total = [
                c if a is None else a if c is None else a + c
                for a, c in zip(total, contrib, strict=True)
            ]
        return p_out, total

    def apply(self, kernel, primals, tangents, outs, out_avals, kw, batch, backend):
        primals = list(primals)
        if not batch:
            symbolic = [None if type(t) is ad.Zero else t for t in tangents]
            p_out, t_out = self._unbatched(kernel, primals, symbolic, outs, kw, backend)
            t_out = [
                ad.Zero(a.to_tangent_aval()) if t is None else t
                for t, a in zip(t_out, out_avals, strict=True)
            ]
            return p_out, t_out
        n = len(primals)
        # Zero tangents stay None (an empty pytree to vmap), so integer inputs
        # never need float0 arrays and per-input rules are skipped for them.
        tangents = [None if type(t) is ad.Zero else t for t in tangents]

        def one(*flat: Any) -> list[Any]:
            p_out, t_out = self._unbatched(
                kernel, list(flat[:n]), list(flat[n:]), outs, kw, backend
            )
            t_out = [_zeros(a) if t is None else t for t, a in zip(t_out, out_avals, strict=True)]
            return p_out + t_out

        masks = [mask + mask for _, mask in batch]
        res = vmap_levels(one, batch, masks)(*primals, *tangents)
        return res[: len(out_avals)], res[len(out_avals) :]


def _not_differentiable(kernel: Any, k: int, primal: Any) -> NotImplementedError:
    aval = f"{np.dtype(primal.dtype).name}{list(jnp.shape(primal))}"
    return NotImplementedError(
        f"input {k} ({aval}) of kernel {kernel.name!r} is not differentiable "
        "(def_jvp_rule2 gave xla_custom_kernel.NOT_DIFFERENTIABLE for it), but a derivative "
        "with respect to it was asked for; differentiate with respect to the other inputs "
        "only, or pass this one through jax.lax.stop_gradient"
    )


def transpose(kernel: Any, rule, cts, args, outs, out_avals, kw, batch, backend):
    """Cotangents of ``args`` (None for those that are not linear inputs)."""
    n = len(args)
    undefined = [i for i, a in enumerate(args) if ad.is_undefined_primal(a)]
    extra = backend_keyword(rule, backend)

    def run(cts_: Sequence[Any], args_: Sequence[Any]) -> list[Any]:
        res = rule(list(cts_), *args_, outs=outs, **kw, **extra)
        if not isinstance(res, list | tuple) or len(res) != n:
            got = f"{len(res)} values" if isinstance(res, list | tuple) else repr(type(res))
            raise ValueError(
                f"the transpose rule of kernel {kernel.name!r} must return one cotangent per input "
                f"({n}, None for inputs that are not linear), got {got}"
            )
        return [None if type(r) is ad.Zero else r for r in res]

    if not batch:
        cts = [ad.instantiate_zeros(ct) for ct in cts]
        res = run(cts, args)
        return [r if i in undefined else None for i, r in enumerate(res)]

    cts = [ad.instantiate_zeros(ct) for ct in cts]
    defined = [i for i in range(n) if i not in undefined]
    inner = {i: _inner_aval(args[i].aval, batch, i) for i in undefined}
    n_ct = len(cts)

    def one(*flat: Any) -> list[Any]:
        full: list[Any] = [None] * n
        for i, x in zip(defined, flat[n_ct:], strict=True):
            full[i] = x
        for i in undefined:
            full[i] = ad.UndefinedPrimal(inner[i])
        res = run(flat[:n_ct], full)
        return [_zeros(inner[i]) if res[i] is None else res[i] for i in undefined]

    masks = [(True,) * n_ct + tuple(mask[i] for i in defined) for _, mask in batch]
    # Output j is input undefined[j]'s cotangent: summed over levels that
    # broadcast that input. Its mask at a level is the level's own mask.
    out_mapped = [tuple(mask[i] for i in undefined) for _, mask in batch]
    res = vmap_levels(one, batch, masks, out_mapped)(*cts, *(args[i] for i in defined))
    out: list[Any] = [None] * n
    for i, r in zip(undefined, res, strict=True):
        out[i] = r
    return out


def defjvp(primitive: Any, *rules: Callable[..., Any] | None) -> None:
    """One JVP rule per input for an XLACustomKernel (or its ``primitive``);
    same as ``kernel.def_jvp_rule2(*rules)`` (None: a zero derivative;
    ``NOT_DIFFERENTIABLE``: an error where the input is differentiated)."""
    for kernel in registered_kernels().values():
        if primitive is kernel or primitive is kernel.primitive:
            kernel.def_jvp_rule2(*rules)
            return
    raise TypeError(
        f"`primitive` must be an XLACustomKernel or the primitive of one, got {primitive!r}; "
        "for other primitives use jax.interpreters.ad.defjvp"
    )
