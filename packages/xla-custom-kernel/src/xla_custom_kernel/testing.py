"""``check_kernel`` for operations made with ``XLACustomKernel``: the checks of
``kernel_check`` (the kernel-check package, a dependency of this one) plus every backend registered for the platform against
the default.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from xla_custom_kernel import XLACustomKernel
    >>> from xla_custom_kernel.testing import check_kernel
    >>> double = XLACustomKernel("doc_check_double")
    >>> _ = double.def_jax_kernel(lambda outs: lambda x: 2 * x)
    >>> _ = double.def_kernel("jax_mul", "cpu", lambda outs: lambda x: x * 2.0)
    >>> double.def_jvp_rule2(lambda t, x, outs: 2 * t)
    >>> double.def_transpose_rule(lambda cts, x, outs: [2 * cts[0]])  # doctest: +ELLIPSIS
    <function <lambda> at ...>
    >>> x = jnp.arange(4.0)
    >>> report = check_kernel(
    ...     double,
    ...     x,
    ...     kwargs={"outs": jax.ShapeDtypeStruct(x.shape, x.dtype)},
    ...     reference=lambda x: 2 * x,
    ...     skip=["bad_inputs"],  # a sketch: it does not check its inputs
    ... )
    >>> [row.check for row in report.results if row.family == "backends"]
    ["backends: backend 'jax_mul'", "backends: backend 'jax_mul' vs reference"]
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
from kernel_check import CHECKS as CHECKS
from kernel_check import TOLERANCES as TOLERANCES
from kernel_check import CheckReport as CheckReport
from kernel_check import CheckResult as CheckResult
from kernel_check import Status as Status
from kernel_check import check_kernel as _check_kernel

from ._kernel import XLACustomKernel
from ._platforms import platform_of_backend
from ._selection import forced_backend

__all__ = ["CHECKS", "TOLERANCES", "CheckReport", "CheckResult", "Status", "check_kernel"]


class _KernelCall:
    # `kernel.call` under its call function's name and signature
    # (`__wrapped__`), so that check_kernel's `differentiable=` and messages
    # name the call function's parameters (`input 3 (`v`)`); the bound method
    # has only `*args`.
    def __init__(self, kernel: XLACustomKernel, call_fn: Callable[..., Any]) -> None:
        functools.update_wrapper(self, call_fn)
        self.kernel = kernel

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.kernel.call(*args, **kwargs)


def _forcing(fn: Callable[..., Any], backend: str) -> Callable[..., Any]:
    # A kernel's call function takes the backend itself (and would reset a
    # forced one to its own `backend=None`); any other function gets it forced.
    if isinstance(fn, _KernelCall) or getattr(fn, "__func__", None) is XLACustomKernel.call:

        def call(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, backend=backend, **kwargs)

    else:

        def call(*args: Any, **kwargs: Any) -> Any:
            with forced_backend(backend):
                return fn(*args, **kwargs)

    call.__name__ = f"{getattr(fn, '__name__', 'op')}[{backend}]"
    return call


def backend_variants(
    kernel: XLACustomKernel, fn: Callable[..., Any], platform: str | None = None
) -> dict[str, Callable[..., Any]]:
    """``fn`` (which calls ``kernel``) with each backend of ``kernel`` on
    ``platform`` other than its default forced, by ``"backend 'name'"``.

    Example:
        >>> from xla_custom_kernel import XLACustomKernel
        >>> op = XLACustomKernel("doc_check_variants")
        >>> _ = op.def_jax_kernel(lambda outs: lambda x: x)
        >>> _ = op.def_kernel("copy", "cpu", lambda outs: lambda x: x + 0)
        >>> list(backend_variants(op, op, "cpu"))
        ["backend 'copy'"]
    """
    platform = platform or platform_of_backend(jax.default_backend())
    default = kernel.fixed_default(platform)
    return {
        f"backend {b!r}": _forcing(fn, b)
        for b in kernel.available_backends(platform)
        if b != default
    }


def defining_modules(kernel: XLACustomKernel, platform: str | None = None) -> tuple[str, ...]:
    """The modules that define ``kernel``'s call function and kernel generators
    on ``platform``: what a fresh process imports to deserialize it.

    Example:
        >>> from xla_custom_kernel import XLACustomKernel
        >>> op = XLACustomKernel("doc_check_modules")
        >>> _ = op.def_jax_kernel(lambda outs: lambda x: x)
        >>> defining_modules(op, "cpu")
        ('xla_custom_kernel.testing',)
    """
    platform = platform or platform_of_backend(jax.default_backend())
    found = [kernel._call_fn] if kernel._call_fn is not None else []
    found += [
        kernel._table.check_backend(platform, b).generator
        for b in kernel.available_backends(platform)
    ]
    names = (getattr(f, "__module__", None) for f in found)
    return tuple(dict.fromkeys(n for n in names if n and not n.startswith("xla_custom_kernel._")))


def check_kernel(
    op: Callable[..., Any],
    *args: Any,
    kwargs: Mapping[str, Any] | None = None,
    backends_of: XLACustomKernel | None = None,
    **options: Any,
) -> CheckReport:
    """``kernel_check.check_kernel`` (see there for the checks and
    options), with the ``backends`` check for ``XLACustomKernel``s.

    Args:
        op: an ``XLACustomKernel`` (called with ``kwargs``, which hold its
            ``outs`` and static keywords; without ``outs``, its call function
            registered with ``def_call`` is called), or any function calling
            operations (give ``backends_of`` to check the backends of one).
        *args: sample inputs.
        kwargs: keywords passed to the op on every call.
        backends_of: the ``XLACustomKernel`` whose backends ``op`` calls;
            default: ``op`` itself when it is one.
        **options: the other options of ``kernel_check.check_kernel``;
            for an ``XLACustomKernel``, ``export_imports`` defaults to the
            modules defining its generators and call function, and
            ``sharding_rule`` to its rule (``def_sharding_rule``).

    Returns:
        The :class:`CheckReport`; ``print`` it for the table.

    Raises:
        AssertionError: a check failed (unless ``raises=False``).
    """
    kwargs = dict(kwargs or {})
    fn: Callable[..., Any] = op
    if isinstance(op, XLACustomKernel):
        backends_of = op if backends_of is None else backends_of
        options.setdefault("name", op.name)
        if "outs" not in kwargs and op._call_fn is not None:
            fn = _KernelCall(op, op._call_fn)
        if "sharding_rule" not in options and op.sharding_rule is not None:
            options["sharding_rule"] = op.sharding_rule
        if "export_imports" not in options and defining_modules(op):
            options["export_imports"] = defining_modules(op)
    if backends_of is not None and not isinstance(backends_of, XLACustomKernel):
        raise TypeError(
            f"`backends_of` must be an XLACustomKernel or None, got {type(backends_of)!r}"
        )
    if backends_of is not None and "variants" not in options:
        options["variants"] = backend_variants(backends_of, fn)
    return _check_kernel(fn, *args, kwargs=kwargs, **options)
