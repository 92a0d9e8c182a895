"""``BridgeCatalog``: one bridge's kernels, made once and found again by digest.

A bridge wraps each kernel object into its ``KernelInfo`` once (validation and
the digest run at the first wrap), remembers it by digest so that
``ffi_core.deserialize`` can make an exported target again, and accepts the
kernel objects a user passes in ``deserialize``'s ``kernels``. The recipe
step a target records names the kernel by digest and the signature by its
fields; the rebuilder the catalog registers reads both back.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from .._spec import CallSig
from ..export import (
    CALL_SIG_FIELDS,
    KernelCatalog,
    StepField,
    Unexportable,
    register_kernel_acceptor,
    register_rebuilder,
)
from ._info import KernelInfo

__all__ = ["BridgeCatalog"]

#: ``rebuild(info, sig, step)``: make the target of ``info``'s kernel for ``sig`` again.
Rebuild = Callable[[Any, CallSig, Mapping[str, Any]], None]


class BridgeCatalog:
    """The kernels one bridge has wrapped in this process.

    Args:
        make_info: validates a kernel object and returns its ``KernelInfo``
            (a TypeError naming what is accepted for anything else).
        kernel_type: the type(s) of the bridge's kernel objects, which
            ``deserialize``'s ``kernels`` may hold.
        language, wrapper, passed, captured: as for ``KernelCatalog``, which
            holds the kernels by digest.

    Example:
        >>> class Toy:
        ...     pass
        >>> catalog = BridgeCatalog(
        ...     lambda k: KernelInfo(name="toy", label="toy kernel 'toy'", qualname="m.toy", digest="ab"),
        ...     kernel_type=Toy, language="toy kernel", wrapper="toy_kernel", passed="the Toy",
        ... )
        >>> kernel = Toy()
        >>> catalog.info(kernel) is catalog.info(kernel)
        True
        >>> catalog.find({"digest": "ab", "kernel": "m.toy"}).name
        'toy'
    """

    def __init__(
        self,
        make_info: Callable[[Any], KernelInfo],
        *,
        kernel_type: type | tuple[type, ...],
        language: str,
        wrapper: str,
        passed: str,
        captured: str = "captures",
    ) -> None:
        self._make_info = make_info
        self._kernel_type = kernel_type
        self._known = KernelCatalog(language, wrapper, passed, captured)
        self._passed = passed
        self._lock = threading.Lock()
        # Kernel object -> its info, by identity: weak keys where the object
        # allows (no id reused by another object), else kept with its info.
        # Infos stay remembered by digest either way (export needs them).
        self._weak: weakref.WeakKeyDictionary[Any, KernelInfo] = weakref.WeakKeyDictionary()
        self._strong: dict[int, tuple[Any, KernelInfo]] = {}

    def info(self, kernel: Any) -> KernelInfo:
        """The validated ``KernelInfo`` of ``kernel``, made once per kernel
        object and remembered by digest."""
        found = self._cached(kernel)
        if found is not None:
            return found
        info = self._make_info(kernel)
        with self._lock:
            try:
                info = self._weak.setdefault(kernel, info)
            except TypeError:  # not weakly referenceable: kept with its info
                info = self._strong.setdefault(id(kernel), (kernel, info))[1]
        self._known.remember(info)
        return info

    def _cached(self, kernel: Any) -> KernelInfo | None:
        with self._lock:
            try:
                return self._weak.get(kernel)
            except TypeError:
                entry = self._strong.get(id(kernel))
                return None if entry is None else entry[1]

    def find(self, step: Mapping[str, Any]) -> KernelInfo:
        """The kernel a recipe step names by ``digest`` (and ``kernel``, its
        qualified name), or an ``ffi_core.MissingKernelError`` saying what to
        import."""
        return self._known.find(step)

    def accept(self, obj: object) -> bool:
        """Make ``obj`` known when it is one of this bridge's kernels."""
        if not isinstance(obj, self._kernel_type):
            return False
        self.info(obj)
        return True

    def register(
        self,
        kind: str,
        rebuild: Rebuild,
        *,
        extras: Mapping[str, StepField] = {},
        fields: Mapping[str, StepField] = {},
        distribution: str | None = None,
    ) -> None:
        """Register how a ``kind`` recipe step (see ``recipe_step``) is made
        again, and accept this bridge's kernels in ``deserialize`` (whose
        messages name them as ``passed``).

        Args:
            kind: the step kind, as ``recipe_step`` writes it.
            rebuild: ``rebuild(info, sig, step)`` makes the target again.
            extras: the ``CallSig`` extras the step holds, in their order.
            fields: the step's other fields of the bridge's own.
            distribution: the bridge's distribution (``"numba-cpu-ffi"``),
                which exported steps carry so that a process without it is
                told what to install (see ``register_rebuilder``).
        """
        checked = {
            "kernel": StepField.text(),
            "digest": StepField.digest(),
            **CALL_SIG_FIELDS,
            **extras,
            **fields,
        }
        names = tuple(extras)

        def rebuild_step(step: Mapping[str, Any]) -> None:
            # An extra added after some steps were written (StepField.added)
            # may be absent; the others were checked present.
            present = tuple(name for name in names if name in step)
            rebuild(self.find(step), CallSig.from_step(step, present), step)

        register_rebuilder(kind, rebuild_step, fields=checked, distribution=distribution)
        register_kernel_acceptor(self.accept, what=self._passed)

    @staticmethod
    def recipe_step(
        kind: str, info: KernelInfo, sig: CallSig, **fields: Any
    ) -> dict[str, Any] | Unexportable:
        """The step that makes the target of ``info`` and ``sig`` again: its
        ``kind``, the kernel's qualified name and digest, the signature and
        the bridge's ``fields``. An ``Unexportable`` where the kernel's digest
        holds memory addresses (``info.address_bound``, when it has them).

        Example:
            >>> from ffi_core.bridge import ArraySig
            >>> info = KernelInfo(name="f", label="toy kernel 'f'", qualname="m.f", digest="cd")
            >>> sig = CallSig((ArraySig("int8", 1),), (ArraySig("int8", 1),))
            >>> BridgeCatalog.recipe_step("toy", info, sig)["digest"]
            'cd'
        """
        bound = getattr(info, "address_bound", ())
        if bound:
            return Unexportable(
                f"{info.label} ({info.qualname!r}) captures values whose repr holds a memory "
                f"address ({'; '.join(bound)}), so its digest differs in every process; make "
                "them module constants of a stable repr (numbers, strings, tuples, arrays) or "
                "pass them as arguments"
            )
        return {
            "kind": kind,
            "kernel": info.qualname,
            "digest": info.digest,
            **sig.to_step(),
            **fields,
        }
