"""The primitive of a kernel: its parameters, abstract evaluation and lowering.

A call binds the primitive with ``outs`` (the output avals), ``multiple``
(whether the user gets a tuple), ``static`` (sorted static keywords),
``backend`` (forced or None) and ``batch`` (the batch levels of
``_transforms``). Lowering picks the backend's entry for the platform, runs its
generator once per distinct signature, checks what the callable returns and
lowers it, lifted over the batch levels.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from ffi_core import ShardingRule
from ffi_core.bridge import (
    bridge_primitive_abstract_eval,
    def_eager_impl,
    is_output_spec,
    normalize_outs,
    partitioned_call,
)
from ffi_core.export import recipe_context
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from ._adapters import install_hint
from ._autodiff import as_outputs
from ._call_site import CallSite
from ._chooser import find_chooser
from ._entry import KernelEntry
from ._errors import BackendError, NoKernelError, UnknownBackendError
from ._export import recipe_step
from ._platforms import LOWERING_PLATFORMS
from ._selection import AUTO
from ._table import BackendTable
from ._transforms import apply_levels

__all__ = ["GeneratorCache", "abstract_eval", "new_primitive", "out_structs", "user_outs"]


def out_structs(
    outs: Any,
) -> tuple[tuple[jax.ShapeDtypeStruct, ...], bool, Callable[[Sequence[Any]], Any]]:
    """``outs`` of a call as structs, whether generators and rules get a tuple,
    and the function rebuilding the caller's structure from the results.

    ``outs`` is checked by the rule every bridge shares
    (``ffi_core.bridge.normalize_outs``): anything with ``shape`` and ``dtype``, or a
    sequence or pytree of them.
    """
    structs, rebuild = normalize_outs(outs)
    if not structs:
        raise ValueError("`outs` must hold at least one jax.ShapeDtypeStruct, got none")
    return structs, not is_output_spec(outs), rebuild


def user_outs(outs: Sequence[Any], multiple: bool) -> Any:
    """The ``outs`` a generator or rule gets: one struct, or a tuple of them."""
    structs = tuple(jax.ShapeDtypeStruct(o.shape, o.dtype) for o in outs)
    return structs if multiple else structs[0]


def abstract_eval(*avals: Any, outs, multiple, static, backend, batch, sharding=None):
    del multiple, static, backend, sharding
    prefix = tuple(size for size, _ in batch)
    # ffi-core's rule: the outputs vary along the inputs' manual mesh axes.
    return bridge_primitive_abstract_eval(
        *avals, out_avals=[o.update(shape=prefix + o.shape) for o in outs]
    )


def _describe(aval: Any) -> str:
    return f"{np.dtype(aval.dtype).name}{list(aval.shape)}"


class GeneratorCache:
    """The callables kernel generators returned, once per (platform, backend,
    outputs, static keywords), each checked against the declared outputs."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel  # passed to adapters (they name it in messages) and choosers
        self._lock = threading.RLock()  # a generator may lower another call of the kernel
        self._fns: dict[Any, Callable[..., Any]] = {}

    def get(self, entry: KernelEntry, outs, multiple, static) -> Callable[..., list[Any]]:
        key = (entry.platform, entry.backend, outs, multiple, static)
        with self._lock:
            fn = self._fns.get(key)
            if fn is None:
                declared = user_outs(outs, multiple)
                fn = entry.generator(outs=declared, **dict(static))
                if entry.adapt is not None:
                    extra = {"static": dict(static)} if _takes_static(entry.adapt) else {}
                    fn = entry.adapt(self.kernel, entry, fn, declared, **extra)
                if not callable(fn):
                    raise TypeError(
                        f"the kernel generator returned {type(fn)!r}; it must return a callable "
                        "taking the input arrays and returning the outputs"
                    )
                self._fns[key] = fn
        return _checked(entry, fn, outs)


def _takes_static(adapt: Callable[..., Any]) -> bool:
    try:
        return "static" in inspect.signature(adapt).parameters
    except (TypeError, ValueError):
        return False


def _checked(entry: KernelEntry, fn: Callable[..., Any], outs) -> Callable[..., list[Any]]:
    def run(*args: Any) -> list[Any]:
        results = as_outputs(fn(*args), len(outs), f"backend {entry.backend!r}")
        for k, (r, o) in enumerate(zip(results, outs, strict=True)):
            if not hasattr(r, "dtype"):
                raise TypeError(
                    f"backend {entry.backend!r} returned {type(r)!r} for output {k}, not an "
                    f"array; the call declared {_describe(o)}"
                )
            if tuple(np.shape(r)) != o.shape or np.dtype(r.dtype) != o.dtype:
                raise ValueError(
                    f"backend {entry.backend!r} returned {_describe(r)} for output {k}; "
                    f"the call declared {_describe(o)}"
                )
        return results

    return run


def _batching_mode(fn: Callable[..., Any], batch, avals_in) -> str:
    try:
        jax.eval_shape(
            apply_levels(fn, batch, "vmap"),
            *(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals_in),
        )
    except NotImplementedError:
        return "loop"
    return "vmap"


def _lowering(
    ctx,
    *args,
    name: str,
    table: BackendTable,
    generator_cache: GeneratorCache,
    lowering_platform: str,
    outs,
    multiple,
    static,
    backend,
    batch,
    sharding=None,
):
    generator_cache.kernel.check_current()
    platform = LOWERING_PLATFORMS[lowering_platform]
    chosen = table.select(platform, backend)
    if chosen == AUTO:
        site = CallSite(
            generator_cache.kernel, platform, tuple(ctx.avals_in), outs, multiple, static, batch
        )
        chosen = find_chooser().choose(site)
        if chosen not in site.backends:
            raise ValueError(
                f"the chooser of backend 'auto' picked {chosen!r} for {name!r} on {platform}; "
                f"it must pick one of {', '.join(map(repr, site.backends))}"
            )
    entry = table.check_backend(platform, chosen)
    try:
        fn = generator_cache.get(entry, outs, multiple, static)
        mode = entry.batching
        if batch and mode == "auto":
            mode = _batching_mode(fn, batch, ctx.avals_in)
        f = apply_levels(fn, batch, mode) if batch else fn
        if sharding is not None:
            f = _partitioned(
                _LocalCall(generator_cache, entry, multiple, static, batch, mode),
                sharding,
                batch,
                ctx.avals_out,
            )
        with recipe_context(recipe_step(name, entry, outs, multiple, static)):
            return mlir.lower_fun(f, multiple_results=True)(ctx, *args)
    except (NoKernelError, UnknownBackendError):
        raise
    except Exception as exc:
        # An ImportError from an adapter already says how to install the
        # backend's package: the hint is added only where it does not.
        hint = install_hint(entry.backend) if isinstance(exc, ImportError) else ""
        hint = f" ({hint})" if hint and hint not in str(exc) else ""
        switch = table.switch_hint(platform, entry.backend)
        # Not str.capitalize: it would lower-case the names in the hint.
        raise BackendError(
            f"backend {entry.backend!r} of kernel {name!r} failed on platform {platform!r}: "
            f"{type(exc).__name__}: {exc}{hint}. {switch[:1].upper()}{switch[1:]}"
        ) from exc


class _LocalCall:
    # The backend's callable for the outputs of one shard (under a sharded jit
    # with a sharding rule): generated for the shard's output shapes, lifted
    # over the same batch levels.
    def __init__(
        self, generator_cache: GeneratorCache, entry: KernelEntry, multiple, static, batch, mode
    ):
        self._args = (generator_cache, entry, multiple, static, batch, mode)

    def __call__(self, out_avals: Sequence[Any], *args: Any) -> list[Any]:
        generator_cache, entry, multiple, static, batch, mode = self._args
        outs = tuple(a.update(shape=a.shape[len(batch) :]) for a in out_avals)
        fn = generator_cache.get(entry, outs, multiple, static)
        return list((apply_levels(fn, batch, mode) if batch else fn)(*args))


def _partitioned(local: _LocalCall, rule: ShardingRule, batch, avals_out):
    # Each batch level is one more leading factor, outermost first.
    for _, mask in reversed(batch):
        rule = rule.batched(mask)

    def run(*args: Any) -> list[Any]:
        return partitioned_call(local, args, avals_out, rule)

    return run


def new_primitive(
    name: str,
    *,
    table: BackendTable,
    generator_cache: GeneratorCache,
    batching_rule: Callable[..., Any],
    jvp_rule: Callable[..., Any],
    transpose_rule: Callable[..., Any],
) -> Primitive:
    """The primitive ``name``, with its impl, abstract eval, a lowering for each
    of JAX's platforms and the given transformation rules."""
    prim = Primitive(name)
    prim.multiple_results = True
    def_eager_impl(prim)
    prim.def_abstract_eval(abstract_eval)
    for lowering_platform in LOWERING_PLATFORMS:
        mlir.register_lowering(
            prim,
            functools.partial(
                _lowering,
                name=name,
                table=table,
                generator_cache=generator_cache,
                lowering_platform=lowering_platform,
            ),
            platform=lowering_platform,
        )
    batching.primitive_batchers[prim] = batching_rule
    ad.primitive_jvps[prim] = jvp_rule
    ad.primitive_transposes[prim] = transpose_rule
    return prim
