"""The backends of one kernel: its entries per platform, each platform's default,
and which entry a call uses."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ._adapters import bare_kernel, missing_bridge
from ._chooser import find_chooser
from ._entry import BATCHING_MODES, KernelEntry
from ._errors import BackendPreferenceWarning, NoKernelError, UnknownBackendError
from ._platforms import BACKEND_PLATFORMS, check_platform
from ._selection import (
    AUTO,
    get_backend,
    invalidate_caches,
    platform_preference,
)

__all__ = ["BackendTable"]


class BackendTable:
    """Entries of kernel ``kernel_name`` by platform and backend, and defaults.

    An entry whose bridge package is not installed is registered but
    unavailable: ``available`` leaves it out, ``"auto"`` and the process-wide
    preferences pass over it, and :meth:`select` raises the ImportError naming
    its install extra only where it would run: chosen for the call, the
    platform's default set with ``asdefault``/``set_default``, or the first
    registered where no backend of the platform is installed.
    """

    def __init__(self, kernel_name: str) -> None:
        self.kernel_name = kernel_name
        self._lock = threading.RLock()
        self._entries: dict[str, dict[str, KernelEntry]] = {}
        # Defaults set with asdefault=True or set_default; elsewhere the
        # default is the first backend registered that is installed.
        self._explicit: dict[str, str] = {}
        # Platforms whose default is "auto"; the fixed default stays the one
        # used where no measurement can be made.
        self._auto: set[str] = set()
        # (platform, backend) preferences already warned about.
        self._warned: set[tuple[str, str]] = set()

    def _names(self, platform: str) -> str:
        return ", ".join(
            b if missing_bridge(e) is None else f"{b} (unavailable)"
            for b, e in self._entries[platform].items()
        )

    def describe(self) -> str:
        """``"cpu: numba, jax; gpu: warp (unavailable: warp-ffi is not
        installed)"`` in registration order, for ``repr``."""
        parts = []
        for p, entries in self._entries.items():
            names = []
            for b, e in entries.items():
                missing = missing_bridge(e)
                names.append(
                    b if missing is None else f"{b} (unavailable: {missing.split(';')[0]})"
                )
            parts.append(f"{p}: {', '.join(names)}")
        return "; ".join(parts)

    def summary(self) -> str:
        """The backends of every platform that has one, for messages."""
        parts = [f"{p}: {self._names(p)}" for p in BACKEND_PLATFORMS if self._entries.get(p)]
        return "; ".join(parts) or "none"

    @property
    def entries(self) -> Mapping[str, Mapping[str, KernelEntry]]:
        """A read-only view of the entries, ``{platform: {backend: entry}}``."""
        return MappingProxyType({p: MappingProxyType(e) for p, e in self._entries.items()})

    # ---------------------------------------------------------------- registration

    def add(self, entry: KernelEntry, asdefault: bool) -> KernelEntry:
        if not isinstance(entry.backend, str) or not entry.backend:
            raise TypeError(f"`backend` must be a non-empty str, got {entry.backend!r}")
        if entry.backend == AUTO:
            raise ValueError(
                "`backend` 'auto' names the autotuner's choice among the registered backends; "
                "register the backends under names of their own"
            )
        check_platform(entry.platform)
        if not callable(entry.generator):
            raise TypeError(
                f"`kg` must be a callable kernel generator kg(outs=..., **kwargs), got {type(entry.generator)!r}"
            )
        kind = bare_kernel(entry.generator)
        if kind is not None:
            raise TypeError(
                f"`kg` must be a kernel generator kg(outs=..., **kwargs) returning the kernel, "
                f"got {kind} itself; pass `lambda outs, **kwargs: kernel`"
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
                    f"{entry.platform!r} of kernel {self.kernel_name!r}; each backend is registered once"
                )
            before = self.fixed_default(entry.platform)
            existing[entry.backend] = entry
            if asdefault:
                self._explicit[entry.platform] = entry.backend
            if self.fixed_default(entry.platform) != before:
                invalidate_caches()
        return entry

    # ---------------------------------------------------------------- defaults

    def set_default(self, platform: str, backend: str) -> None:
        check_platform(platform)
        with self._lock:
            if backend == AUTO:
                if not self._entries.get(platform):
                    raise NoKernelError(
                        f"no kernel registered for platform {platform!r} in {self.kernel_name!r} "
                        f"to choose from; registered: {self.summary()}"
                    )
                find_chooser()
                if platform not in self._auto:
                    self._auto.add(platform)
                    invalidate_caches()
                return
            self.check_backend(platform, backend)
            before = self.get_default(platform)
            self._auto.discard(platform)
            self._explicit[platform] = backend
            if backend != before:
                invalidate_caches()

    def get_default(self, platform: str) -> str | None:
        check_platform(platform)
        return AUTO if platform in self._auto else self.fixed_default(platform)

    def fixed_default(self, platform: str) -> str | None:
        """The default of ``platform`` that is a backend, also where the default
        is "auto": the one set with ``asdefault``/``set_default``, else the
        first registered that is installed (the first registered where none
        is); None where the platform has no backend."""
        check_platform(platform)
        entries = self._entries.get(platform)
        if not entries:
            return None
        if platform in self._explicit:
            return self._explicit[platform]
        installed = (b for b, e in entries.items() if missing_bridge(e) is None)
        return next(installed, next(iter(entries)))

    @property
    def defaults(self) -> dict[str, str]:
        found = {p: self.get_default(p) for p in self._entries if self._entries[p]}
        return {p: b for p, b in found.items() if b is not None}

    def available(self, platform: str) -> tuple[str, ...]:
        """The backends of ``platform`` that can run: registered, and their
        bridge package installed."""
        check_platform(platform)
        entries = self._entries.get(platform, {})
        return tuple(b for b, e in entries.items() if missing_bridge(e) is None)

    def unavailable(self, platform: str) -> dict[str, str]:
        """The backends of ``platform`` registered but not installed, with why."""
        check_platform(platform)
        found = {b: missing_bridge(e) for b, e in self._entries.get(platform, {}).items()}
        return {b: why for b, why in found.items() if why is not None}

    # ---------------------------------------------------------------- selection

    def check_backend(self, platform: str, backend: Any) -> KernelEntry:
        """The entry of ``backend`` on ``platform``, or the error saying what exists."""
        if not isinstance(backend, str):
            raise TypeError(f"`backend` must be a str, got {type(backend)!r}")
        entries = self._entries.get(platform, {})
        if backend not in entries:
            known = ", ".join(map(repr, entries)) or "none"
            raise UnknownBackendError(
                f"unknown backend {backend!r} for platform {platform!r} of kernel "
                f"{self.kernel_name!r}; registered for {platform}: {known}"
            )
        return entries[backend]

    def require(self, entry: KernelEntry, why: str) -> KernelEntry:
        """``entry``, or the ImportError naming its install extra where its
        bridge package is not installed; ``why`` says why it would run."""
        missing = missing_bridge(entry)
        if missing is not None:
            package, _, hint = missing.partition(" is not installed; ")
            raise ImportError(
                f"backend {entry.backend!r} of kernel {self.kernel_name!r} ({why}) needs "
                f"{package}, which is not installed; {hint}"
            )
        return entry

    def check_known(self, backend: Any) -> None:
        """Refuse a backend registered on no platform (a call's ``backend=``),
        one whose bridge package is not installed, and ``"auto"`` where no
        chooser is installed to make its choices."""
        if not isinstance(backend, str):
            raise TypeError(f"`backend` must be a str or None, got {type(backend)!r}")
        if backend == AUTO:
            find_chooser()
            return
        found = [e[backend] for e in self._entries.values() if backend in e]
        if not found:
            raise UnknownBackendError(
                f"unknown backend {backend!r} for kernel {self.kernel_name!r}; registered: "
                f"{self.summary()}"
            )
        if all(missing_bridge(e) is not None for e in found):
            self.require(found[0], "chosen for the call")

    def select(self, platform: str, backend: str | None) -> str:
        """The backend a call on ``platform`` uses, or ``"auto"``: ``backend``
        when given, else the preference set for the platform (a warning where
        this kernel lacks it), else the preference for every platform where
        installed and registered, else the platform's default. Raises the
        ImportError of a backend chosen so whose bridge is not installed."""
        entries = self._entries.get(platform)
        if not entries:
            raise NoKernelError(
                f"no kernel registered for platform {platform!r} in {self.kernel_name!r}; "
                f"registered: {self.summary()}"
            )
        if backend is not None:
            if backend == AUTO:
                return self._auto_or_default(platform)
            return self.require(
                self.check_backend(platform, backend), "chosen for the call"
            ).backend
        preferred = platform_preference(platform)
        if preferred is not None:
            if preferred == AUTO:
                return self._auto_or_default(platform)
            if preferred in self.available(platform):
                return preferred
            self._warn_preference(platform, preferred)
        else:
            preferred = get_backend()
            if preferred == AUTO:
                return self._auto_or_default(platform)
            if preferred is not None and preferred in self.available(platform):
                return preferred
        if platform in self._auto:
            return self._auto_or_default(platform)
        return self._default(platform)

    def _auto_or_default(self, platform: str) -> str:
        # "auto" chooses among the installed backends; where none is, the
        # fixed default's ImportError says what to install.
        return AUTO if self.available(platform) else self._default(platform)

    def _default(self, platform: str) -> str:
        backend = self.fixed_default(platform)
        assert backend is not None  # select checked that the platform has entries
        entries = self._entries[platform]
        if platform in self._explicit:
            why = f"the default of platform {platform!r}"
        elif len(entries) == 1:
            why = f"the only backend registered for platform {platform!r}"
        else:
            why = f"the first registered for platform {platform!r}, where none is installed"
        return self.require(entries[backend], why).backend

    def _warn_preference(self, platform: str, preferred: str) -> None:
        with self._lock:
            if (platform, preferred) in self._warned:
                return
            self._warned.add((platform, preferred))
        entry = self._entries[platform].get(preferred)
        reason = "is not registered" if entry is None else f"cannot run ({missing_bridge(entry)})"
        warnings.warn(
            f"backend {preferred!r}, preferred on platform {platform!r} with "
            f"xla_custom_kernel.set_backend({platform!r}, {preferred!r}), {reason} for kernel "
            f"{self.kernel_name!r}; ignoring it there and using the kernel's default "
            f"({self.get_default(platform)!r})",
            BackendPreferenceWarning,
            stacklevel=2,
        )

    def switch_hint(self, platform: str, failed: str) -> str:
        """How to switch away from backend ``failed`` on ``platform`` (for messages)."""
        others = [b for b in self.available(platform) if b != failed]
        if not others:
            return (
                f"no other backend is registered for {platform}; register one, for example "
                f"with get_kernel({self.kernel_name!r}).def_jax_kernel(...)"
            )
        other = others[0]
        return (
            f"other backends for {platform}: {', '.join(map(repr, others))}; switch with "
            f"xla_custom_kernel.get_kernel({self.kernel_name!r}).set_default({platform!r}, {other!r}) "
            f"or pass backend={other!r} to the call"
        )
