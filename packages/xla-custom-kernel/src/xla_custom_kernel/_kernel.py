"""``XLACustomKernel``: one JAX primitive, several backends per platform."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax
import numpy as np
from jax import core as jax_core
from jax._src import dispatch  # eager calls compile the primitive once, like jax's own
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from . import _autodiff
from ._entry import BACKEND_EXTRAS, BATCHING_MODES, KernelEntry
from ._errors import BackendError, NoKernelError, UnknownBackendError
from ._platforms import LOWERING_PLATFORMS, PLATFORMS, check_platform
from ._registry import register_kernel
from ._selection import current_forced, forced_backend, get_backend, invalidate_caches, set_backend
from ._transforms import apply_levels, move_batch_axes

__all__ = ["XLACustomKernel"]


def _out_structs(outs: Any) -> tuple[tuple[jax.ShapeDtypeStruct, ...], bool]:
    def one(o: Any, where: str) -> jax.ShapeDtypeStruct:
        if not (hasattr(o, "shape") and hasattr(o, "dtype")):
            raise TypeError(
                f"`outs` must be a jax.ShapeDtypeStruct or a sequence of them, got {type(o)!r}{where}"
            )
        return jax.ShapeDtypeStruct(tuple(o.shape), np.dtype(o.dtype))

    if isinstance(outs, list | tuple):
        if not outs:
            raise ValueError(
                "`outs` must hold at least one jax.ShapeDtypeStruct, got an empty sequence"
            )
        return tuple(one(o, f" at position {k}") for k, o in enumerate(outs)), True
    return (one(outs, ""),), False


def _describe(aval: Any) -> str:
    return f"{np.dtype(aval.dtype).name}{list(aval.shape)}"


class XLACustomKernel:
    """One operation as a JAX primitive, with one kernel per backend and platform.

    Register kernels with :meth:`def_kernel` or a shorthand
    (:meth:`def_numba_kernel`, :meth:`def_jax_kernel`, ...). A *kernel
    generator* ``kg(outs=..., **static_kwargs)`` returns a callable taking the
    input arrays and returning the outputs; it runs at lowering time, once per
    distinct (platform, backend, outputs, static keywords). The first kernel
    registered for a platform is its default.

    Calls: ``kernel(*inputs, outs=..., backend=None, **static_kwargs)``. The
    backend is, in order: ``backend=``, the one forced by :meth:`call`, the
    process-wide preference (:func:`set_backend`) where registered, the
    platform's default.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> scale = XLACustomKernel("doc_scale", doc="x * factor")
        >>> _ = scale.def_jax_kernel(lambda outs, factor: lambda x: x * factor)
        >>> x = jnp.arange(3.0)
        >>> jax.jit(lambda x: scale(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), factor=2.0))(x)
        Array([0., 2., 4.], dtype=float32)
    """

    def __init__(self, name: str, doc: str | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"`name` must be a non-empty str, got {name!r}")
        if doc is not None and not isinstance(doc, str):
            raise TypeError(f"`doc` must be a str or None, got {type(doc)!r}")
        self.name = name
        self.doc = doc
        self.__doc__ = doc
        self.primitive = Primitive(name)
        self.primitive.multiple_results = True
        self._lock = threading.RLock()
        self._entries: dict[str, dict[str, KernelEntry]] = {}
        self._defaults: dict[str, str] = {}
        self._generated: dict[Any, Callable[..., Any]] = {}
        self._call_fn: Callable[..., Any] | None = None
        self._benchmark_data_fn: Callable[..., Any] | None = None
        self._tags: tuple[str, ...] = ()
        self._jvp: _autodiff.JVP | None = None
        self._transpose: Callable[..., Any] | None = None
        self._batching: Callable[..., Any] | None = None
        register_kernel(self)

        prim = self.primitive
        prim.def_impl(functools.partial(dispatch.apply_primitive, prim))
        prim.def_abstract_eval(self._abstract_eval)
        for lowering_platform in LOWERING_PLATFORMS:
            mlir.register_lowering(
                prim,
                functools.partial(self._lowering, lowering_platform=lowering_platform),
                platform=lowering_platform,
            )
        batching.primitive_batchers[prim] = self._batching_rule
        ad.primitive_jvps[prim] = self._jvp_rule
        ad.primitive_transposes[prim] = self._transpose_rule

    def __repr__(self) -> str:
        regs = (
            "; ".join(f"{p}: {', '.join(self._entries[p])}" for p in self._entries) or "no kernels"
        )
        return f"XLACustomKernel({self.name!r}; {regs})"

    # ---------------------------------------------------------------- registration

    def def_kernel(
        self,
        backend: str,
        platform: str,
        kg: Callable[..., Any],
        asdefault: bool = False,
        *,
        batching: str = "auto",
    ) -> KernelEntry:
        """Register kernel generator ``kg`` as ``backend`` on ``platform``.

        Args:
            backend: the backend's name, e.g. ``"numba"`` or ``"jax"``.
            platform: ``"cpu"``, ``"gpu"`` or ``"tpu"``.
            kg: ``kg(outs=..., **static_kwargs)`` returning a callable that takes
                the input arrays and returns the outputs (one array, or a
                sequence for several outputs).
            asdefault: make it the platform's default (the first kernel
                registered for a platform is its default anyway).
            batching: how ``vmap`` runs it: ``"vmap"`` (vmap the callable: one
                call where its operations batch natively), ``"loop"`` (one call
                per batch element in one XLA loop) or ``"auto"`` (``"vmap"``
                when the callable can be vmapped, else ``"loop"``).

        Returns:
            The :class:`KernelEntry` registered.
        """
        return self._register(KernelEntry(backend, platform, kg, batching), asdefault)

    def _register(self, entry: KernelEntry, asdefault: bool) -> KernelEntry:
        if not isinstance(entry.backend, str) or not entry.backend:
            raise TypeError(f"`backend` must be a non-empty str, got {entry.backend!r}")
        check_platform(entry.platform)
        if not callable(entry.generator):
            raise TypeError(
                f"`kg` must be a callable kernel generator kg(outs=..., **kwargs), got {type(entry.generator)!r}"
            )
        if entry.batching not in BATCHING_MODES:
            raise ValueError(
                f"`batching` must be one of {', '.join(map(repr, BATCHING_MODES))}, got {entry.batching!r}"
            )
        if not isinstance(asdefault, bool):
            raise TypeError(f"`asdefault` must be a bool, got {type(asdefault)!r}")
        with self._lock:
            existing = self._entries.setdefault(entry.platform, {})
            if entry.backend in existing:
                raise ValueError(
                    f"backend {entry.backend!r} is already registered for platform "
                    f"{entry.platform!r} of kernel {self.name!r}; each backend is registered once"
                )
            existing[entry.backend] = entry
            if asdefault or entry.platform not in self._defaults:
                self._set_default(entry.platform, entry.backend)
        return entry

    def def_jax_kernel(
        self, kg: Callable[..., Any], platform: str | None = None, asdefault: bool = False
    ) -> tuple[KernelEntry, ...]:
        """Register a pure-JAX reference backend named ``"jax"``.

        ``kg`` returns a function of jnp/lax code. With ``platform=None`` it is
        registered on every platform (default only where none exists yet).
        """
        platforms = PLATFORMS if platform is None else (check_platform(platform),)
        return tuple(
            self._register(KernelEntry("jax", p, kg, "vmap"), asdefault) for p in platforms
        )

    def def_numba_kernel(self, kg: Callable[..., Any], asdefault: bool = False) -> KernelEntry:
        """Register a Numba CPU backend named ``"numba"`` (needs ``xla-custom-kernel[numba]``).

        ``kg`` may return a callable made with ``numba_cpu_ffi.numba_kernel``,
        or the ``@numba.njit`` function itself (``kernel(in..., out...)``),
        which is then wrapped for ``outs``, and whose run-time errors name this
        operation, the backend and how to switch to another.
        """
        from ._backends import adapt_numba

        return self._register(KernelEntry("numba", "cpu", kg, "vmap", adapt_numba), asdefault)

    def def_numba_cuda_kernel(self, kg: Callable[..., Any], asdefault: bool = False) -> KernelEntry:
        """Register a Numba CUDA backend ``"numba_cuda"`` on ``"gpu"``; ``kg``
        returns a callable made with ``numba_cuda_ffi`` (``xla-custom-kernel[numba-cuda]``)."""
        return self._register(KernelEntry("numba_cuda", "gpu", kg, "vmap"), asdefault)

    def def_warp_kernel(self, kg: Callable[..., Any], asdefault: bool = False) -> KernelEntry:
        """Register a Warp backend ``"warp"`` on ``"gpu"``; ``kg`` returns a JAX
        callable such as one made by ``warp.jax_experimental.jax_kernel``."""
        return self._register(KernelEntry("warp", "gpu", kg, "auto"), asdefault)

    def def_triton_kernel(self, kg: Callable[..., Any], asdefault: bool = False) -> KernelEntry:
        """Register a Triton backend ``"triton"`` on ``"gpu"``; ``kg`` returns a
        JAX callable such as one using ``jax_triton.triton_call``."""
        return self._register(KernelEntry("triton", "gpu", kg, "auto"), asdefault)

    def def_pallas_kernel(
        self, platform: str, kg: Callable[..., Any], asdefault: bool = False
    ) -> KernelEntry:
        """Register a Pallas backend ``"pallas"`` on ``"gpu"`` or ``"tpu"``; ``kg``
        returns a function calling ``jax.experimental.pallas.pallas_call``."""
        check_platform(platform)
        if platform == "cpu":
            raise ValueError(
                "`platform` of a Pallas kernel must be 'gpu' or 'tpu', got 'cpu' "
                "(Pallas runs on CPU only in interpret mode: register that with def_kernel)"
            )
        return self._register(KernelEntry("pallas", platform, kg, "auto"), asdefault)

    # ---------------------------------------------------------------- defaults

    def _set_default(self, platform: str, backend: str) -> None:
        changed = self._defaults.get(platform) != backend
        self._defaults[platform] = backend
        if changed:
            invalidate_caches()

    def set_default(self, platform: str, backend: str) -> None:
        """Make ``backend`` the default of ``platform``; takes effect on the next
        call, also of functions already jitted."""
        check_platform(platform)
        with self._lock:
            self._check_backend(platform, backend)
            self._set_default(platform, backend)

    def get_default(self, platform: str) -> str | None:
        """The default backend of ``platform``, or None when it has no kernel."""
        check_platform(platform)
        return self._defaults.get(platform)

    @property
    def defaults(self) -> dict[str, str]:
        """A copy of ``{platform: default backend}``."""
        return dict(self._defaults)

    def available_backends(self, platform: str) -> tuple[str, ...]:
        """The backends registered for ``platform``, in registration order."""
        check_platform(platform)
        return tuple(self._entries.get(platform, {}))

    set_backend = staticmethod(set_backend)
    get_backend = staticmethod(get_backend)

    def _registered_summary(self) -> str:
        parts = [f"{p}: {', '.join(self._entries[p])}" for p in PLATFORMS if self._entries.get(p)]
        return "; ".join(parts) or "none"

    def _check_backend(self, platform: str, backend: Any) -> KernelEntry:
        if not isinstance(backend, str):
            raise TypeError(f"`backend` must be a str, got {type(backend)!r}")
        entries = self._entries.get(platform, {})
        if backend not in entries:
            known = ", ".join(map(repr, entries)) or "none"
            raise UnknownBackendError(
                f"unknown backend {backend!r} for platform {platform!r} of kernel {self.name!r}; "
                f"registered for {platform}: {known}"
            )
        return entries[backend]

    def _check_known(self, backend: Any) -> None:
        if not isinstance(backend, str):
            raise TypeError(f"`backend` must be a str or None, got {type(backend)!r}")
        if not any(backend in e for e in self._entries.values()):
            raise UnknownBackendError(
                f"unknown backend {backend!r} for kernel {self.name!r}; registered: "
                f"{self._registered_summary()}"
            )

    def _select(self, platform: str, backend: str | None) -> KernelEntry:
        entries = self._entries.get(platform)
        if not entries:
            raise NoKernelError(
                f"no kernel registered for platform {platform!r} in {self.name!r}; "
                f"registered: {self._registered_summary()}"
            )
        if backend is not None:
            return self._check_backend(platform, backend)
        preferred = get_backend()
        if preferred is not None and preferred in entries:
            return entries[preferred]
        return entries[self._defaults[platform]]

    def switch_hint(self, platform: str, failed: str) -> str:
        """How to switch away from backend ``failed`` on ``platform`` (for messages)."""
        others = [b for b in self._entries.get(platform, {}) if b != failed]
        if not others:
            return (
                f"no other backend is registered for {platform}; register one, for example "
                f"with get_kernel({self.name!r}).def_jax_kernel(...)"
            )
        other = others[0]
        return (
            f"other backends for {platform}: {', '.join(map(repr, others))}; switch with "
            f"xla_custom_kernel.get_kernel({self.name!r}).set_default({platform!r}, {other!r}) "
            f"or pass backend={other!r} to the call"
        )

    # ---------------------------------------------------------------- calling

    def __call__(self, *inputs: Any, outs: Any, backend: str | None = None, **static: Any) -> Any:
        """Call the operation; see the class docstring."""
        structs, multiple = _out_structs(outs)
        for i, x in enumerate(inputs):
            if not isinstance(x, jax.Array | np.ndarray | np.generic):
                raise TypeError(
                    f"input {i} of kernel {self.name!r} must be an array (jax.Array or numpy.ndarray), "
                    f"got {type(x)!r}; pass Python numbers as static keywords or wrap them with jnp.asarray"
                )
        for key, value in static.items():
            try:
                hash(value)
            except TypeError:
                raise TypeError(
                    f"static keyword {key!r} of kernel {self.name!r} must be hashable (it is part of "
                    f"the compiled signature), got {type(value)!r}; use a tuple instead of a list, "
                    "or pass arrays as inputs"
                ) from None
        if backend is None:
            backend = current_forced()
        else:
            self._check_known(backend)
        if self._jvp is not None:
            self._jvp.check_arity(self.name, len(inputs))
        results = self.primitive.bind(
            *inputs,
            outs=tuple(jax_core.ShapedArray(s.shape, s.dtype) for s in structs),
            multiple=multiple,
            static=tuple(sorted(static.items())),
            backend=backend,
            batch=(),
        )
        return tuple(results) if multiple else results[0]

    def def_call(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Register the user-facing call function (``fn(*args, **kwargs)``, which
        computes ``outs`` and calls the kernel); run it with :meth:`call`."""
        if not callable(fn):
            raise TypeError(f"`fn` must be callable, got {type(fn)!r}")
        self._call_fn = fn
        return fn

    @property
    def has_call(self) -> bool:
        return self._call_fn is not None

    def call(self, *args: Any, backend: str | None = None, **kwargs: Any) -> Any:
        """Run the function registered with :meth:`def_call`; with ``backend``,
        every call of this kernel it makes uses that backend."""
        if self._call_fn is None:
            raise ValueError(
                f"kernel {self.name!r} has no call function; register one with "
                f"@{self.name}.def_call (a function of the inputs that calls the kernel with its outs)"
            )
        if backend is not None:
            self._check_known(backend)
        with forced_backend(backend):
            return self._call_fn(*args, **kwargs)

    # ---------------------------------------------------------------- tags, benchmarks

    def def_tags(self, *tags: str) -> None:
        """Add tags (for :func:`registered_kernels` and ``kernel-bench run --tags``)."""
        for t in tags:
            if not isinstance(t, str):
                raise TypeError(f"tags must be str, got {type(t)!r}")
        self._tags = tuple(dict.fromkeys(self._tags + tags))

    @property
    def tags(self) -> tuple[str, ...]:
        return self._tags

    def def_benchmark_data(self, fn: Callable[..., Iterable[Any]]) -> Callable[..., Iterable[Any]]:
        """Register ``fn(*, platform)`` returning ``kernel_bench.BenchmarkConfig``s."""
        if not callable(fn):
            raise TypeError(f"`fn` must be callable, got {type(fn)!r}")
        self._benchmark_data_fn = fn
        return fn

    @property
    def has_benchmark_data(self) -> bool:
        return self._benchmark_data_fn is not None

    def benchmark_data(self, *, platform: str) -> list[Any]:
        """The benchmark configurations of ``platform`` (see :meth:`def_benchmark_data`)."""
        check_platform(platform)
        if self._benchmark_data_fn is None:
            raise ValueError(
                f"kernel {self.name!r} has no benchmark data; register a function returning "
                f"kernel_bench.BenchmarkConfig objects with @{self.name}.def_benchmark_data"
            )
        return list(self._benchmark_data_fn(platform=platform))

    def benchmark(self, **kwargs: Any) -> Any:
        """Time every backend of a platform on the benchmark data; see
        ``kernel_bench.benchmark_kernel`` for the keywords (``platform``,
        ``n_warmup``, ``n_runs``, ``n_batch_per_run``, ``compare_results``,
        ``rtol``, ``atol``, ``verbose``, ``catch_errors``, ``backends``)."""
        try:
            from kernel_bench import benchmark_kernel
        except ImportError as exc:
            raise ImportError(
                "XLACustomKernel.benchmark needs kernel-bench; install it with "
                'uv add "xla-custom-kernel[bench]"'
            ) from exc
        return benchmark_kernel(self, **kwargs)

    # ---------------------------------------------------------------- transform rules

    def def_batching_rule(self, fun: Callable[..., Any]) -> Callable[..., Any]:
        """Replace the default batching with ``fun(args, dims, *, outs, **static)``
        returning ``(outputs, out_dims)`` like a JAX batching rule, or
        ``NotImplemented`` to use the default rule for that case.

        Calls of this kernel made inside ``fun`` use the backend of the call
        being batched."""
        if not callable(fun):
            raise TypeError(f"`fun` must be callable, got {type(fun)!r}")
        self._batching = fun
        return fun

    def register_general_batching(self) -> None:
        """Go back to the default batching (:meth:`general_batching_rule`)."""
        self._batching = None

    def general_batching_rule(
        self, args: Sequence[Any], dims: Sequence[int | None], **params: Any
    ) -> tuple[list[Any], list[int]]:
        """The default batching rule: one more batch level on the same primitive,
        resolved at lowering (see the module docs of ``_transforms``)."""
        size, moved, mask = move_batch_axes(args, dims)
        params = {**params, "batch": ((size, mask), *params["batch"])}
        outs = self.primitive.bind(*moved, **params)
        return list(outs), [0] * len(outs)

    def def_jvp_rule(self, fun: Callable[..., Any]) -> Callable[..., Any]:
        """Register ``fun(primals, tangents, *, outs, **static)`` returning
        ``(primal_outs, tangent_outs)``; a tangent may be None for zero."""
        if not callable(fun):
            raise TypeError(f"`fun` must be callable, got {type(fun)!r}")
        self._jvp = _autodiff.JVP(full=fun)
        return fun

    def def_jvp_rule2(self, *rules: Callable[..., Any] | None) -> None:
        """One rule per input: ``rule(tangent, *primals, outs, **static)`` returns
        the outputs' tangent(s) from that input; None: zero derivative."""
        for r in rules:
            if r is not None and not callable(r):
                raise TypeError(f"JVP rules must be callables or None, got {type(r)!r}")
        self._jvp = _autodiff.JVP(per_input=tuple(rules))

    def def_transpose_rule(self, fun: Callable[..., Any]) -> Callable[..., Any]:
        """Register ``fun(cts, *args, outs, **static)`` returning one cotangent per
        input (None for inputs that are not linear); linear inputs arrive as
        ``jax.interpreters.ad.UndefinedPrimal``."""
        if not callable(fun):
            raise TypeError(f"`fun` must be callable, got {type(fun)!r}")
        self._transpose = fun
        return fun

    # ---------------------------------------------------------------- primitive rules

    @staticmethod
    def _abstract_eval(*avals: Any, outs, multiple, static, backend, batch):
        del avals, multiple, static, backend
        prefix = tuple(size for size, _ in batch)
        return [o.update(shape=prefix + o.shape) for o in outs]

    def _user_outs(self, outs: Sequence[Any], multiple: bool) -> Any:
        structs = tuple(jax.ShapeDtypeStruct(o.shape, o.dtype) for o in outs)
        return structs if multiple else structs[0]

    def _kernel_fn(self, entry: KernelEntry, outs, multiple, static) -> Callable[..., Any]:
        key = (entry.platform, entry.backend, outs, multiple, static)
        with self._lock:
            fn = self._generated.get(key)
            if fn is None:
                user_outs = self._user_outs(outs, multiple)
                fn = entry.generator(outs=user_outs, **dict(static))
                if entry.adapt is not None:
                    fn = entry.adapt(self, entry, fn, user_outs)
                if not callable(fn):
                    raise TypeError(
                        f"the kernel generator returned {type(fn)!r}; it must return a callable "
                        "taking the input arrays and returning the outputs"
                    )
                self._generated[key] = fn
        return fn

    def _checked(
        self, entry: KernelEntry, fn: Callable[..., Any], outs
    ) -> Callable[..., list[Any]]:
        def run(*args: Any) -> list[Any]:
            results = _autodiff.as_outputs(fn(*args), len(outs), f"backend {entry.backend!r}")
            for k, (r, o) in enumerate(zip(results, outs, strict=True)):
                if tuple(np.shape(r)) != o.shape or np.dtype(r.dtype) != o.dtype:
                    raise ValueError(
                        f"backend {entry.backend!r} returned {_describe(r)} for output {k}; "
                        f"the call declared {_describe(o)}"
                    )
            return results

        return run

    def _lowering(self, ctx, *args, lowering_platform, outs, multiple, static, backend, batch):
        platform = LOWERING_PLATFORMS[lowering_platform]
        entry = self._select(platform, backend)
        try:
            fn = self._checked(entry, self._kernel_fn(entry, outs, multiple, static), outs)
            mode = entry.batching
            if batch and mode == "auto":
                mode = _batching_mode(fn, batch, ctx.avals_in)
            f = apply_levels(fn, batch, mode) if batch else fn
            return mlir.lower_fun(f, multiple_results=True)(ctx, *args)
        except (NoKernelError, UnknownBackendError):
            raise
        except Exception as exc:
            hint = ""
            if isinstance(exc, ImportError):
                extra = BACKEND_EXTRAS.get(entry.backend)
                if extra:
                    hint = f' (install it with: uv add "xla-custom-kernel[{extra}]")'
            switch = self.switch_hint(platform, entry.backend)
            # Not str.capitalize: it would lower-case the names in the hint.
            raise BackendError(
                f"backend {entry.backend!r} of kernel {self.name!r} failed on platform {platform!r}: "
                f"{type(exc).__name__}: {exc}{hint}. {switch[:1].upper()}{switch[1:]}"
            ) from exc

    def _batching_rule(self, args, dims, **params):
        if self._batching is None or params["batch"]:
            return self.general_batching_rule(args, dims, **params)
        with forced_backend(params["backend"]):
            result = self._batching(
                args,
                dims,
                outs=self._user_outs(params["outs"], params["multiple"]),
                **dict(params["static"]),
            )
        if result is NotImplemented:
            return self.general_batching_rule(args, dims, **params)
        return result

    def _jvp_rule(self, primals, tangents, *, outs, multiple, static, backend, batch):
        if self._jvp is None:
            raise NotImplementedError(
                f"kernel {self.name!r} has no JVP rule, so it cannot be differentiated; define one "
                f"with def_jvp_rule or def_jvp_rule2 (or use jax.custom_jvp/custom_vjp around the call)"
            )
        with forced_backend(backend):
            return self._jvp.apply(
                self, primals, tangents, self._user_outs(outs, multiple), outs, dict(static), batch
            )

    def _transpose_rule(self, cts, *args, outs, multiple, static, backend, batch):
        if self._transpose is None:
            raise NotImplementedError(
                f"kernel {self.name!r} has no transpose rule, so it cannot be used in reverse mode "
                "(jax.grad, jax.vjp, jax.linear_transpose); define one with def_transpose_rule"
            )
        with forced_backend(backend):
            return _autodiff.transpose(
                self,
                self._transpose,
                cts,
                args,
                self._user_outs(outs, multiple),
                outs,
                dict(static),
                batch,
            )


def _batching_mode(fn: Callable[..., Any], batch, avals_in) -> str:
    try:
        jax.eval_shape(
            apply_levels(fn, batch, "vmap"),
            *(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals_in),
        )
    except NotImplementedError:
        return "loop"
    return "vmap"
