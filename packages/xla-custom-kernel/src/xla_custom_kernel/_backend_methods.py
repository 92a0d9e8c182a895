"""The methods of ``XLACustomKernel`` that register kernels, one per backend.

Each seed backend has its own documented ``def_<backend>_kernel`` method. A
backend whose bridge package is not installed is registered all the same, as
unavailable: the ImportError naming its install extra is raised only where it
would run (see ``BackendTable.select``). Backends that other packages add through the adapter
table (``register_backend_adapter``) get theirs from ``XLACustomKernel``'s
``__getattr__``, or use :meth:`BackendMethods.def_backend_kernel`.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

from ._adapters import backend_adapter
from ._entry import KernelEntry
from ._platforms import BACKEND_PLATFORMS, check_platform
from ._table import BackendTable

__all__ = ["BackendMethods"]


class BackendMethods:
    """Kernel registration, mixed into ``XLACustomKernel``."""

    name: str
    _table: BackendTable

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
            asdefault: make it the platform's default (otherwise the first
                backend registered for a platform whose bridge is installed is
                its default).
            batching: how ``vmap`` runs it: ``"vmap"`` (vmap the callable: one
                call where its operations batch natively), ``"loop"`` (one call
                per batch element in one XLA loop) or ``"auto"`` (``"vmap"``
                when the callable can be vmapped, else ``"loop"``).

        Returns:
            The :class:`KernelEntry` registered.
        """
        return self._register(KernelEntry(backend, platform, kg, batching), asdefault)

    def _register(self, entry: KernelEntry, asdefault: bool) -> KernelEntry:
        return self._table.add(entry, asdefault)

    def def_backend_kernel(
        self, backend: str, kg: Callable[..., Any], asdefault: bool = False
    ) -> KernelEntry | tuple[KernelEntry, ...]:
        """Register ``kg`` as ``backend`` as its adapter says: on the adapter's
        platform (the entries, where it has several), with its batching mode and
        its adapter of what ``kg`` returns (see ``register_backend_adapter``).
        Where the adapter's bridge package is not installed the entries are
        registered as unavailable (see :meth:`unavailable_backends`)."""
        adapter = backend_adapter(backend)
        if adapter is None:
            raise ValueError(
                f"no backend adapter named {backend!r}; register one with "
                "xla_custom_kernel.register_backend_adapter, or use def_kernel(backend, "
                "platform, kg)"
            )
        entries = tuple(
            self._register(
                KernelEntry(adapter.name, p, kg, adapter.batching, adapter.adapt, adapter.module),
                asdefault,
            )
            for p in adapter.platforms
        )
        return entries[0] if len(entries) == 1 else entries

    def _def_bridge_kernel(
        self, backend: str, kg: Callable[..., Any], asdefault: bool
    ) -> tuple[KernelEntry, ...]:
        # The seed's named backends. One whose bridge package is absent is
        # registered as unavailable: a library registers every backend at
        # import, and a user installs only the bridges they run.
        adapter = backend_adapter(backend)
        if adapter is None:
            raise ImportError(
                f"def_{backend}_kernel of kernel {self.name!r} needs the adapter of backend "
                f"{backend!r}, which is not registered; register one with "
                "xla_custom_kernel.register_backend_adapter"
            )
        entries = self.def_backend_kernel(backend, kg, asdefault)
        return entries if isinstance(entries, tuple) else (entries,)

    def def_jax_kernel(
        self, kg: Callable[..., Any], platform: str | None = None, asdefault: bool = False
    ) -> tuple[KernelEntry, ...]:
        """Register a pure-JAX reference backend named ``"jax"``.

        ``kg`` returns a function of jnp/lax code. With ``platform=None`` it is
        registered on every platform (default only where none exists yet, or
        everywhere with ``asdefault=True``).
        """
        platforms = BACKEND_PLATFORMS if platform is None else (check_platform(platform),)
        return tuple(
            self._register(KernelEntry("jax", p, kg, "vmap"), asdefault) for p in platforms
        )

    def def_numba_kernel(self, kg: Callable[..., Any], asdefault: bool = False) -> KernelEntry:
        """Register a Numba CPU backend named ``"numba"`` (needs ``xla-custom-kernel[numba]``).

        ``kg`` may return a callable made with ``numba_cpu_ffi.numba_kernel``,
        or the ``@numba.njit`` function itself (``kernel(in..., out...)``),
        which is then wrapped for ``outs``, and whose run-time errors name this
        operation, the backend and how to switch to another.

        Without numba-cpu-ffi installed the backend is registered as unavailable;
        running it raises an ImportError naming the extra.
        """
        return self._def_bridge_kernel("numba", kg, asdefault)[0]

    def def_numba_cuda_kernel(self, kg: Callable[..., Any], asdefault: bool = False) -> KernelEntry:
        """Register a Numba CUDA backend ``"numba_cuda"`` on ``"gpu"``; ``kg``
        returns a callable made with ``numba_cuda_ffi`` (``xla-custom-kernel[numba-cuda]``).

        Without numba-cuda-ffi installed the backend is registered as unavailable;
        running it raises an ImportError naming the extra.
        """
        return self._def_bridge_kernel("numba_cuda", kg, asdefault)[0]

    def def_warp_kernel(
        self, kg: Callable[..., Any], asdefault: bool = False
    ) -> tuple[KernelEntry, ...]:
        """Register a Warp backend ``"warp"`` on ``"cpu"`` and ``"gpu"``; the
        two entries.

        ``kg`` returns a bare ``@wp.kernel`` (or ``(kernel, launch_dims)``),
        which is wrapped with ``warp_ffi.warp_kernel`` for ``outs``: Warp's
        CPU build called natively on the CPU, its CUDA build launched natively
        on NVIDIA GPUs. Static keywords of the call that name scalar
        parameters of the kernel are passed to it. It may also return any JAX
        callable. Needs ``xla-custom-kernel[warp]``.

        Without warp-ffi installed the backend is registered as unavailable;
        running it raises an ImportError naming the extra.
        """
        return self._def_bridge_kernel("warp", kg, asdefault)

    def def_triton_kernel(self, kg: Callable[..., Any], asdefault: bool = False) -> KernelEntry:
        """Register a Triton backend ``"triton"`` on ``"gpu"``; ``kg`` returns
        ``(kernel, config)``, a bare ``@triton.jit`` kernel and the keywords of
        ``triton_ffi.triton_kernel`` (``grid``, ``num_warps``, constexprs), or
        any JAX callable. Needs ``xla-custom-kernel[triton]``.

        Without triton-ffi installed the backend is registered as unavailable;
        running it raises an ImportError naming the extra.
        """
        return self._def_bridge_kernel("triton", kg, asdefault)[0]

    def def_cuda_raw_kernel(self, kg: Callable[..., Any], asdefault: bool = False) -> KernelEntry:
        """Register a CUDA C++ backend ``"cuda_raw"`` on ``"gpu"``; ``kg`` returns
        ``(module, kernel name, launch)``: a ``cuda_source_ffi.CudaModule``
        (from ``load_cuda_inline`` / ``load_cuda_file``), one of its kernels
        and the keywords of ``CudaModule.kernel`` (``grid`` and ``block``, or
        ``launch_dims``); the call's static keywords that name the kernel's
        scalars are passed to it. It may also return any JAX callable. Needs
        ``xla-custom-kernel[cuda-raw]``.

        Without cuda-source-ffi installed the backend is registered as unavailable;
        running it raises an ImportError naming the extra.
        """
        return self._def_bridge_kernel("cuda_raw", kg, asdefault)[0]

    def def_pallas_kernel(
        self,
        platform: str,
        kg: Callable[..., Any],
        asdefault: bool = False,
        *,
        interpret: bool = False,
    ) -> KernelEntry:
        """Register a Pallas backend ``"pallas"``; ``kg`` returns a function
        calling ``jax.experimental.pallas.pallas_call``.

        On ``"gpu"`` and ``"tpu"`` the kernel is compiled (Triton or Mosaic).
        For tests and development on a machine without them, register the same
        generator on ``"cpu"`` with ``interpret=True``: Pallas then runs the
        kernel body as JAX operations (slow; not what runs on a GPU). A
        generator with an ``interpret`` parameter gets it on every platform
        (``True`` only where registered with ``interpret=True``) and passes it
        to ``pallas_call``; ``interpret=True`` needs one.

        Args:
            platform: ``"gpu"`` or ``"tpu"``; ``"cpu"`` with ``interpret=True``.
            kg: ``kg(outs=..., **static_kwargs)``, or ``kg(outs=...,
                interpret=..., **static_kwargs)``.
            asdefault: make it the platform's default.
            interpret: run ``pallas_call`` in interpret mode, on ``"cpu"`` only.

        Returns:
            The :class:`KernelEntry` registered (batching ``"auto"``: under
            ``vmap``, ``pallas_call``'s own batching rule adds a grid axis).

        Example:
            >>> import jax, jax.numpy as jnp
            >>> from jax.experimental import pallas as pl
            >>> def add_one(x_ref, o_ref):
            ...     o_ref[...] = x_ref[...] + 1
            >>> def kg(outs, *, interpret=False):
            ...     return pl.pallas_call(add_one, out_shape=outs, interpret=interpret)
            >>> from xla_custom_kernel import XLACustomKernel
            >>> op = XLACustomKernel("doc_pallas_add_one")
            >>> _ = op.def_pallas_kernel("gpu", kg)  # compiled, on a GPU
            >>> _ = op.def_pallas_kernel("cpu", kg, interpret=True)  # for tests
            >>> x = jnp.arange(3.0)
            >>> op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))
            Array([1., 2., 3.], dtype=float32)
        """
        check_platform(platform)
        if not isinstance(interpret, bool):
            raise TypeError(f"`interpret` must be a bool, got {type(interpret)!r}")
        if interpret and platform != "cpu":
            raise ValueError(
                f"`interpret=True` is for platform 'cpu' (tests and development), got "
                f"{platform!r}; on {platform!r} the compiled kernel runs: register it with "
                f"def_pallas_kernel({platform!r}, kg)"
            )
        if platform not in _PALLAS_PLATFORMS and not interpret:
            raise ValueError(
                f"`platform` of a Pallas kernel must be "
                f"{' or '.join(map(repr, _PALLAS_PLATFORMS))}, got {platform!r}; Pallas runs on "
                "CPU only in interpret mode: def_pallas_kernel('cpu', kg, interpret=True) "
                "registers kg for tests and development and passes it interpret=True, which "
                "kg must pass on to pallas_call"
            )
        return self._register(
            KernelEntry("pallas", platform, _pallas_generator(kg, interpret), "auto"), asdefault
        )


#: Platforms where Pallas compiles kernels; on "cpu" it only interprets them.
_PALLAS_PLATFORMS = ("gpu", "tpu")


def _takes_interpret(kg: Callable[..., Any]) -> bool:
    try:
        param = inspect.signature(kg).parameters.get("interpret")
    except (TypeError, ValueError):  # no signature to read: it cannot be told
        return False
    return param is not None and param.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )


def _pallas_generator(kg: Callable[..., Any], interpret: bool) -> Callable[..., Any]:
    # The registration, not the call, says whether pallas_call interprets: a
    # "gpu" entry always compiles and a "cpu" one always interprets.
    if not _takes_interpret(kg):
        if interpret:
            raise TypeError(
                "with interpret=True the kernel generator `kg` must take an `interpret` "
                "keyword and pass it to pallas_call, e.g. `def kg(outs, *, interpret=False): "
                f"return pl.pallas_call(body, out_shape=outs, interpret=interpret)`; got {kg!r}"
            )
        return kg
    return _PallasGenerator(kg, interpret)


@dataclasses.dataclass(frozen=True)
class _PallasGenerator:
    kg: Callable[..., Any]
    interpret: bool

    def __call__(self, **kwargs: Any) -> Any:
        if "interpret" in kwargs:
            raise TypeError(
                "static keyword `interpret` of a Pallas kernel is set by its registration "
                "(def_pallas_kernel(..., interpret=...)), not by the call; remove it from the call"
            )
        return self.kg(**kwargs, interpret=self.interpret)
