"""``XLACustomKernel``: one JAX primitive, several backends per platform.

A thin class that composes the pieces: the backend table (``_table``), the
registration methods (``_backend_methods``) and the adapters of named backends
(``_adapters``), the primitive with its lowering (``_primitive``), the
transformation rules (``_rules``, registered through ``_rule_methods``), the
registry of kernels by name (``_registry``) and the chooser of backend ``"auto"``
(``_chooser``), which also serves :meth:`XLACustomKernel.explain` and
:meth:`XLACustomKernel.benchmark`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping
from types import FrameType
from typing import Any

import jax
import numpy as np
from ffi_core import ShardingRule
from ffi_core.bridge import check_sharding_rule, require_devices_at_lowering
from jax import core as jax_core

from . import _autodiff
from ._adapters import backend_adapter
from ._backend_methods import BackendMethods
from ._call_site import CallSite
from ._chooser import find_chooser
from ._data_methods import DataMethods
from ._entry import KernelEntry
from ._errors import ReplacedKernelError
from ._primitive import GeneratorCache, new_primitive, out_structs
from ._registry import register_kernel
from ._rule_methods import RuleMethods
from ._rules import Rules
from ._selection import (
    current_forced,
    forced_backend,
    get_backend,
    set_backend,
)
from ._table import BackendTable

__all__ = ["XLACustomKernel"]

_DEF_METHOD = re.compile(r"def_(\w+)_kernel")
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _creating_module(kernel: Any) -> str:
    # The module whose code created the kernel: the first frame outside this
    # package and outside the __init__ of a subclass.
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and (
        os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _PACKAGE_DIR
        or frame.f_locals.get("self") is kernel
    ):
        frame = frame.f_back
    return "<unknown>" if frame is None else str(frame.f_globals.get("__name__", "<unknown>"))


class XLACustomKernel(BackendMethods, RuleMethods, DataMethods):
    """One operation as a JAX primitive, with one kernel per backend and platform.

    Register kernels with :meth:`def_kernel` or a shorthand
    (:meth:`def_numba_kernel`, :meth:`def_jax_kernel`, ...). A *kernel
    generator* ``kg(outs=..., **static_kwargs)`` returns a callable taking the
    input arrays and returning the outputs; it runs at lowering time, once per
    distinct (platform, backend, outputs, static keywords). The first backend
    registered for a platform whose bridge is installed is its default. A backend whose bridge package is
    not installed is registered as unavailable (see :meth:`unavailable_backends`).

    A kernel's name is unique in the process: the module that created it may
    create it again (a reload, a retried import), which replaces it with a
    ``KernelReplacedWarning``; another module gets a ``DuplicateKernelError``.

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
        self._table = BackendTable(name)
        self._generator_cache = GeneratorCache(self)
        self._rules = Rules(self)
        self._call_fn: Callable[..., Any] | None = None
        self._benchmark_data_fn: Callable[..., Any] | None = None
        self._autotune_data_fn: Callable[..., Any] | None = None
        self._tag_order: tuple[str, ...] = ()
        self._sharding_rule: ShardingRule | None = None
        self._replaced_by: str | None = None
        #: The module that created the kernel.
        self.module = _creating_module(self)
        register_kernel(self, self.module)
        self.primitive = new_primitive(
            name,
            table=self._table,
            generator_cache=self._generator_cache,
            batching_rule=self._rules.batching_rule,
            jvp_rule=self._rules.jvp_rule,
            transpose_rule=self._rules.transpose_rule,
        )

    def __repr__(self) -> str:
        return f"XLACustomKernel({self.name!r}; {self._table.describe() or 'no kernels'})"

    def _replace_with(self, newer: XLACustomKernel) -> None:
        # Called by the registry when ``newer`` takes this kernel's name.
        self._replaced_by = newer.module

    def check_current(self) -> None:
        """Raise ``ReplacedKernelError`` where a newer kernel of this name
        replaced this one (its module was reloaded or imported again)."""
        if self._replaced_by is not None:
            raise ReplacedKernelError(
                f"kernel {self.name!r} of module {self.module!r} was replaced by a newer kernel "
                f"of that name (module {self._replaced_by!r} was reloaded or imported again); "
                "this object, and functions traced with it, no longer run. Use the new kernel "
                f"(xla_custom_kernel.get_kernel({self.name!r}), or the module's attribute) and "
                "trace again"
            )

    @property
    def _kernels(self) -> Mapping[str, Mapping[str, KernelEntry]]:
        # The seed's attribute, read by code written against it (brainevent's
        # rules): a read-only view {platform: {backend: KernelEntry}} of every
        # registration, unavailable backends included.
        return self._table.entries

    def __getattr__(self, attr: str) -> Any:
        # def_<name>_kernel for a backend whose adapter another package added.
        match = _DEF_METHOD.fullmatch(attr)
        adapter = backend_adapter(match.group(1)) if match else None
        if adapter is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")

        def def_backend_kernel(kg: Callable[..., Any], asdefault: bool = False) -> Any:
            return self.def_backend_kernel(adapter.name, kg, asdefault)

        def_backend_kernel.__name__ = attr
        return def_backend_kernel

    # ---------------------------------------------------------------- registration

    # ---------------------------------------------------------------- sharding

    def def_sharding_rule(self, rule: Any) -> None:
        """How every call of the operation runs on shards under a sharded ``jit``.

        ``rule`` is ``"elementwise"``, Shardy's einsum-like notation
        (``"i j, j -> i"``) or an ``ffi_core.ShardingRule`` with reduction or
        need-replication factors (see ffi-core's README); None removes it.
        Each device then calls the backend's kernel on its local shard, with
        outputs of the shard's shapes; ``jax.vmap`` adds the batch axis as one
        more factor. A call's ``sharding_rule=`` overrides it. The calls that
        JVP and transpose rules make follow their own kernels' rules (a rule
        that calls this operation gets this rule). Without a rule XLA gathers
        sharded inputs and every device computes the whole result.

        Raises:
            TypeError, ValueError: ``rule`` is not a valid rule.
        """
        self._sharding_rule = check_sharding_rule(rule)
        if self._sharding_rule is not None:
            require_devices_at_lowering(self.primitive)

    @property
    def sharding_rule(self) -> ShardingRule | None:
        """The rule given to :meth:`def_sharding_rule`, or None."""
        return self._sharding_rule

    # ---------------------------------------------------------------- defaults

    def set_default(self, platform: str, backend: str) -> None:
        """Make ``backend`` the default of ``platform``; takes effect on the next
        call, also of functions already jitted.

        ``"auto"``: each call signature (shapes, dtypes, static keywords, batch)
        uses the backend the registered chooser picks for it (see
        ``register_chooser``; kernel-bench's autotuner: the one measured
        fastest); the fixed default stays the fallback where nothing can be
        measured.
        """
        self._table.set_default(platform, backend)

    def get_default(self, platform: str) -> str | None:
        """The default backend of ``platform`` (``"auto"`` where set so), or None
        when it has no kernel."""
        return self._table.get_default(platform)

    def fixed_default(self, platform: str) -> str | None:
        """The default backend of ``platform`` by name: the one used where the
        default is ``"auto"`` but nothing can be measured (the autotuner's
        reference for results, too); None when the platform has no kernel."""
        return self._table.fixed_default(platform)

    @property
    def defaults(self) -> dict[str, str]:
        """A copy of ``{platform: default backend}``."""
        return self._table.defaults

    def available_backends(self, platform: str) -> list[str]:
        """The backends registered for ``platform`` that can run there, in
        registration order (a list, as the seed API returns); those whose
        bridge package is not installed are in :meth:`unavailable_backends`."""
        return list(self._table.available(platform))

    def unavailable_backends(self, platform: str) -> dict[str, str]:
        """The backends registered for ``platform`` whose bridge package is not
        installed, each with the reason and the install command.

        Example:
            >>> import xla_custom_kernel as xck
            >>> op = xck.XLACustomKernel("doc_unavailable")
            >>> xck.register_backend_adapter(
            ...     xck.BackendAdapter("doc_absent", ("gpu",), extra="absent", module="doc_absent_ffi")
            ... )
            >>> _ = op.def_doc_absent_kernel(lambda outs: lambda x: x)
            >>> op.unavailable_backends("gpu")["doc_absent"]
            'doc-absent-ffi is not installed; install it with `pip install "xla-custom-kernel[absent]"` (from wheels built from the repository: `pip install --find-links DIR "xla-custom-kernel[absent]"`; in a uv project: `uv add "xla-custom-kernel[absent]"`)'
        """
        return self._table.unavailable(platform)

    set_backend = staticmethod(set_backend)
    get_backend = staticmethod(get_backend)

    def switch_hint(self, platform: str, failed: str) -> str:
        """How to switch away from backend ``failed`` on ``platform`` (for messages)."""
        return self._table.switch_hint(platform, failed)

    # ---------------------------------------------------------------- calling

    def __call__(
        self,
        *inputs: Any,
        outs: Any,
        backend: str | None = None,
        sharding_rule: Any = None,
        **static: Any,
    ) -> Any:
        """Call the operation; see the class docstring. ``sharding_rule``: this
        call's rule (see :meth:`def_sharding_rule`), overriding the operation's."""
        self.check_current()
        structs, multiple, rebuild = out_structs(outs)
        rule = check_sharding_rule(sharding_rule) or self._sharding_rule
        for i, x in enumerate(inputs):
            if not isinstance(x, jax.Array | np.ndarray | np.generic):
                raise TypeError(
                    f"input {i} of kernel {self.name!r} must be an array (jax.Array or numpy.ndarray), "
                    f"got {type(x)!r}; pass Python numbers as static keywords or wrap them with jnp.asarray"
                )
        for key, value in static.items():
            if isinstance(value, jax.Array):
                what = (
                    "a traced value: the caller is under a transformation such as jit"
                    if isinstance(value, jax.core.Tracer)
                    else "a JAX array"
                )
                raise TypeError(
                    f"static keyword {key!r} of kernel {self.name!r} is {what} "
                    f"({type(value).__name__}); static keywords are part of the compiled "
                    "signature and must be Python values known when tracing. Pass the array "
                    "as an input, or make the value static in the caller "
                    f"(jax.jit(f, static_argnames=...), or a Python {key!r} not derived from "
                    "a traced argument)"
                )
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
            self._table.check_known(backend)
        if self._rules.jvp is not None:
            self._rules.jvp.check_arity(self.name, len(inputs))
        if rule is not None:
            rule = rule.resolve(
                [np.shape(x) for x in inputs],
                [s.shape for s in structs],
                name=f"kernel {self.name!r}",
            )
            require_devices_at_lowering(self.primitive)
        results = self.primitive.bind(
            *inputs,
            outs=tuple(jax_core.ShapedArray(s.shape, s.dtype) for s in structs),
            multiple=multiple,
            static=tuple(sorted(static.items())),
            backend=backend,
            batch=(),
            **({} if rule is None else {"sharding": rule}),
        )
        return rebuild(results)

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
        every call of this kernel it makes uses that backend, and a function
        taking a ``backend`` keyword (by name or ``**kwargs``) gets it, as in
        the seed API."""
        self.check_current()
        if self._call_fn is None:
            raise ValueError(
                f"kernel {self.name!r} has no call function; register one with "
                f"@{self.name}.def_call (a function of the inputs that calls the kernel with its outs)"
            )
        if backend is not None:
            self._table.check_known(backend)
            kwargs.update(_autodiff.backend_keyword(self._call_fn, backend))
        with forced_backend(backend):
            return self._call_fn(*args, **kwargs)

    def explain(self, *inputs: Any, outs: Any, platform: str | None = None, **static: Any) -> Any:
        """Print which backend ``"auto"`` picks for a call with these inputs
        (arrays or ``jax.ShapeDtypeStruct``s) and static keywords on
        ``platform`` (default: JAX's default backend), as the registered
        chooser explains it (kernel-bench's: every candidate's time or why it
        was refused, and where the decision came from). Returns the chooser's
        decision (kernel-bench's ``Decision``).

        Raises:
            ImportError: no chooser is installed (the message says how to
                install kernel-bench).
        """
        site = CallSite.from_call(self, *inputs, outs=outs, platform=platform, **static)
        decision = find_chooser().explain(site)
        print(decision.describe())
        return decision

    def benchmark(self, **kwargs: Any) -> Any:
        """Time every backend of a platform on the benchmark data, as the
        registered chooser does it; kernel-bench's takes the keywords of
        ``kernel_bench.benchmark_kernel`` (``platform``, ``n_warmup``,
        ``n_runs``, ``n_batch_per_run``, ``compare_results``, ``rtol``,
        ``atol``, ``verbose``, ``catch_errors``, ``backends``, ``progress``,
        ``autotune``, ``measure_in_program``, ``seconds_per_run``).

        Raises:
            ImportError: no chooser is installed (the message says how to
                install kernel-bench).
        """
        return find_chooser().benchmark(self, **kwargs)
