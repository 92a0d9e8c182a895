"""Backend adapters: what each named backend is, in one table keyed by name.

An adapter says on which platforms a backend runs, how it batches, how to turn
what its kernel generators return into a JAX callable (for example a bare
``@numba.njit`` function into a ``numba_kernel`` call), and which install extra
brings it. Packages that bridge another kernel language add their backend with
:func:`register_backend_adapter`; every ``XLACustomKernel`` then has a
``def_<name>_kernel(kg, asdefault=False)`` method for it, without any change
to this package.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import threading
from collections.abc import Callable
from typing import Any

from ffi_core.bridge import install_hint as requirement_hint

from ._entry import BATCHING_MODES
from ._platforms import BACKEND_PLATFORMS, check_platform

__all__ = [
    "BackendAdapter",
    "adapt_numba",
    "backend_adapter",
    "backend_adapters",
    "install_hint",
    "missing_bridge",
    "register_backend_adapter",
]


@dataclasses.dataclass(frozen=True)
class BackendAdapter:
    """One backend, as ``XLACustomKernel.def_<name>_kernel`` registers it.

    Attributes:
        name: the backend's name, e.g. ``"warp"``; a valid Python identifier.
        platforms: where it runs; ``def_<name>_kernel`` registers it on each.
        batching: its batching mode (one of ``BATCHING_MODES``).
        adapt: ``adapt(kernel, entry, fn, outs)`` turns what a kernel generator
            returned into a callable of the input arrays; None keeps it as is.
            An adapter that also takes a ``static`` keyword gets the call's
            static keywords (a dict) there.
        extra: the install extra of ``xla-custom-kernel`` that brings the
            backend's package, named in ImportError messages; None for none.
        module: the import name of the backend's bridge package (e.g.
            ``"warp_ffi"``): where it is not installed, ``def_<name>_kernel``
            registers the backend as unavailable, and running it raises an
            ImportError naming ``extra``; None: nothing to check.
    """

    name: str
    platforms: tuple[str, ...]
    batching: str = "auto"
    adapt: Callable[..., Any] | None = dataclasses.field(default=None, repr=False)
    extra: str | None = None
    module: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(
                f"`name` must be a str that is a Python identifier (it names the method "
                f"def_<name>_kernel), got {self.name!r}"
            )
        if not isinstance(self.platforms, tuple) or not self.platforms:
            raise TypeError(
                f"`platforms` must be a non-empty tuple of {', '.join(map(repr, BACKEND_PLATFORMS))}, "
                f"got {self.platforms!r}"
            )
        for platform in self.platforms:
            check_platform(platform, "each of `platforms`")
        if self.batching not in BATCHING_MODES:
            raise ValueError(
                f"`batching` must be one of {', '.join(map(repr, BATCHING_MODES))}, "
                f"got {self.batching!r}"
            )
        if self.adapt is not None and not callable(self.adapt):
            raise TypeError(f"`adapt` must be callable or None, got {type(self.adapt)!r}")
        if self.extra is not None and not isinstance(self.extra, str):
            raise TypeError(f"`extra` must be a str or None, got {type(self.extra)!r}")
        if self.module is not None and not isinstance(self.module, str):
            raise TypeError(f"`module` must be a str or None, got {type(self.module)!r}")


def adapt_numba(kernel: Any, entry: Any, fn: Any, outs: Any) -> Any:
    """Wrap a bare ``@numba.njit`` function with ``numba_kernel``; its run-time
    errors then name the operation, the backend and how to switch."""
    try:
        from numba.core.registry import CPUDispatcher
    except ImportError:  # numba absent: fn cannot be a dispatcher
        return fn
    if not isinstance(fn, CPUDispatcher):
        return fn
    try:
        from numba_cpu_ffi import numba_kernel
    except ImportError as exc:
        raise ImportError(f"numba kernels need numba-cpu-ffi; {install_hint('numba')}") from exc
    context = (
        f"kernel {kernel.name!r}, backend {entry.backend!r} on {entry.platform}; "
        f"{kernel.switch_hint(entry.platform, entry.backend)}"
    )
    return numba_kernel(fn, outs, error_context=context)


def bare_kernel(kg: Any) -> str | None:
    """What ``kg`` is where it is a kernel rather than a kernel generator (a
    ``@numba.njit`` or ``@cuda.jit`` function, a ``@wp.kernel``, a
    ``@triton.jit`` function), else None. Read from its type, importing
    nothing."""
    module = type(kg).__module__
    if module.startswith("numba.") and hasattr(kg, "py_func"):
        return "a Numba kernel (a @numba.njit or @cuda.jit function)"
    if _is_warp_kernel(kg):
        return "a Warp kernel (@wp.kernel)"
    if module.startswith("triton.") and type(kg).__name__ == "JITFunction":
        return "a Triton kernel (@triton.jit)"
    return None


def _is_warp_kernel(fn: Any) -> bool:
    # Without importing warp: it is only needed when the generator returned one.
    return type(fn).__name__ == "Kernel" and type(fn).__module__.startswith("warp.")


def adapt_warp(
    kernel: Any, entry: Any, fn: Any, outs: Any, *, static: dict[str, Any] | None = None
) -> Any:
    """Wrap a bare ``@wp.kernel`` (or ``(kernel, launch_dims)``) with
    ``warp_ffi.warp_kernel``; the call's static keywords that name scalar
    parameters of the kernel are passed to it."""
    launch_dims = None
    if isinstance(fn, tuple) and len(fn) == 2 and _is_warp_kernel(fn[0]):
        fn, launch_dims = fn
    if not _is_warp_kernel(fn):
        return fn
    try:
        from warp_ffi import warp_kernel
    except ImportError as exc:
        raise ImportError(f"warp kernels need warp-ffi; {install_hint('warp')}") from exc
    scalar_names = {arg.label for arg in fn.adj.args}
    scalars = {k: v for k, v in (static or {}).items() if k in scalar_names}
    op = warp_kernel(fn, outs, launch_dims=launch_dims)

    def call(*args: Any) -> Any:
        return op(*args, **scalars)

    return call


def _is_triton_kernel(fn: Any) -> bool:
    return type(fn).__name__ == "JITFunction" and type(fn).__module__.startswith("triton.")


def adapt_triton(
    kernel: Any, entry: Any, fn: Any, outs: Any, *, static: dict[str, Any] | None = None
) -> Any:
    """Wrap ``(kernel, config)`` (a bare ``@triton.jit`` kernel and the keywords
    of ``triton_ffi.triton_kernel``: ``grid``, ``num_warps``, constexprs...)
    with ``triton_kernel``; the call's static keywords that name the kernel's
    other parameters are its scalars."""
    if not (isinstance(fn, tuple) and len(fn) == 2 and _is_triton_kernel(fn[0])):
        return fn
    try:
        from triton_ffi import triton_kernel
    except ImportError as exc:
        raise ImportError(f"triton kernels need triton-ffi; {install_hint('triton')}") from exc
    jit_fn, config = fn
    op = triton_kernel(jit_fn, outs, **config)
    names = {p.name for p in jit_fn.params if not p.is_constexpr}
    scalars = {k: v for k, v in (static or {}).items() if k in names}

    def call(*args: Any) -> Any:
        return op(*args, **scalars)

    return call


def adapt_cuda_raw(
    kernel: Any, entry: Any, fn: Any, outs: Any, *, static: dict[str, Any] | None = None
) -> Any:
    """Wrap ``(module, kernel name, launch)`` (a ``cuda_source_ffi.CudaModule``,
    one of its kernels and the keywords of ``CudaModule.kernel``: ``grid`` and
    ``block`` or ``launch_dims``...) as its JAX operation; the call's static
    keywords that name the kernel's scalars are passed to it."""
    if not (isinstance(fn, tuple) and len(fn) == 3 and type(fn[0]).__name__ == "CudaModule"):
        return fn
    module, name, launch = fn
    op = module.kernel(name, outs, **launch)
    names = {n for _, n in module.kernels[name] if n}
    scalars = {k: v for k, v in (static or {}).items() if k in names}

    def call(*args: Any) -> Any:
        return op(*args, **scalars)

    return call


_lock = threading.Lock()
_adapters: dict[str, BackendAdapter] = {}


def register_backend_adapter(adapter: BackendAdapter, *, replace: bool = False) -> None:
    """Add ``adapter`` to the table (``replace=True`` to change an existing one).

    Example:
        >>> import xla_custom_kernel as xck
        >>> xck.register_backend_adapter(xck.BackendAdapter("doc_lang", ("cpu",), "loop"))
        >>> op = xck.XLACustomKernel("doc_adapter_example")
        >>> op.def_doc_lang_kernel(lambda outs: lambda x: x + 1).batching
        'loop'
    """
    if not isinstance(adapter, BackendAdapter):
        raise TypeError(f"`adapter` must be a BackendAdapter, got {type(adapter)!r}")
    with _lock:
        if adapter.name in _adapters and not replace:
            raise ValueError(
                f"a backend adapter named {adapter.name!r} is already registered; pass "
                "replace=True to replace it"
            )
        _adapters[adapter.name] = adapter


def backend_adapter(name: str) -> BackendAdapter | None:
    """The adapter of backend ``name``, or None."""
    with _lock:
        return _adapters.get(name)


def backend_adapters() -> dict[str, BackendAdapter]:
    """A copy of the table, by backend name, in registration order."""
    with _lock:
        return dict(_adapters)


def install_hint(backend: str) -> str:
    """How to install ``backend``'s package, or "" when its adapter names no extra."""
    adapter = backend_adapter(backend)
    if adapter is None or adapter.extra is None:
        return ""
    return requirement_hint(f"xla-custom-kernel[{adapter.extra}]")


def _installed(module: str) -> bool:
    # Found, not imported: importing a bridge (numba, warp) takes seconds and
    # is left to the first lowering.
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_bridge(entry: Any) -> str | None:
    """Why ``entry`` (a ``KernelEntry``) cannot run: its bridge package is not
    installed, and how to install it; None where it can."""
    if entry.module is None or _installed(entry.module):
        return None
    package = entry.module.replace("_", "-")
    return f"{package} is not installed; {install_hint(entry.backend) or f'install {package}'}"


for _adapter in (
    BackendAdapter("numba", ("cpu",), "vmap", adapt_numba, "numba", "numba_cpu_ffi"),
    BackendAdapter("numba_cuda", ("gpu",), "vmap", None, "numba-cuda", "numba_cuda_ffi"),
    BackendAdapter("warp", ("cpu", "gpu"), "vmap", adapt_warp, "warp", "warp_ffi"),
    BackendAdapter("triton", ("gpu",), "vmap", adapt_triton, "triton", "triton_ffi"),
    BackendAdapter("cuda_raw", ("gpu",), "vmap", adapt_cuda_raw, "cuda-raw", "cuda_source_ffi"),
):
    register_backend_adapter(_adapter)
