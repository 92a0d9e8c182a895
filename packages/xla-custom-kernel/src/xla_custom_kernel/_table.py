"""The backends of one kernel: its entries per platform, each platform's default,
and which entry a call uses."""

from __future__ import annotations

import threading
from typing import Any

from ._entry import BATCHING_MODES, KernelEntry
from ._errors import NoKernelError, UnknownBackendError
from ._platforms import PLATFORMS, check_platform
from ._selection import AUTO, get_backend, invalidate_caches, require_chooser

__all__ = ["BackendTable"]


class BackendTable:
    """Entries of kernel ``kernel_name`` by platform and backend, and defaults."""

    def __init__(self, kernel_name: str) -> None:
        self.kernel_name = kernel_name
        self._lock = threading.RLock()
        self._entries: dict[str, dict[str, KernelEntry]] = {}
        self._defaults: dict[str, str] = {}
        # Platforms whose default is "auto"; _defaults keeps their fixed
        # default, used where no measurement can be made.
        self._auto: set[str] = set()

    def describe(self) -> str:
        """``"cpu: numba, jax; gpu: jax"`` in registration order, for ``repr``."""
        return "; ".join(f"{p}: {', '.join(self._entries[p])}" for p in self._entries)

    def summary(self) -> str:
        """The backends of every platform that has one, for messages."""
        parts = [f"{p}: {', '.join(self._entries[p])}" for p in PLATFORMS if self._entries.get(p)]
        return "; ".join(parts) or "none"

    # ---------------------------------------------------------------- registration

    def add(self, entry: KernelEntry, asdefault: bool) -> KernelEntry:
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
                    f"{entry.platform!r} of kernel {self.kernel_name!r}; each backend is registered once"
                )
            existing[entry.backend] = entry
            if asdefault or entry.platform not in self._defaults:
                self._set_default(entry.platform, entry.backend)
        return entry

    # ---------------------------------------------------------------- defaults

    def _set_default(self, platform: str, backend: str) -> None:
        changed = self._defaults.get(platform) != backend
        self._defaults[platform] = backend
        if changed:
            invalidate_caches()

    def set_default(self, platform: str, backend: str) -> None:
        check_platform(platform)
        with self._lock:
            if backend == AUTO:
                if not self._entries.get(platform):
                    raise NoKernelError(
                        f"no kernel registered for platform {platform!r} in {self.kernel_name!r} "
                        f"to choose from; registered: {self.summary()}"
                    )
                require_chooser()
                if platform not in self._auto:
                    self._auto.add(platform)
                    invalidate_caches()
                return
            self.check_backend(platform, backend)
            if platform in self._auto:
                self._auto.discard(platform)
                invalidate_caches()
            self._set_default(platform, backend)

    def get_default(self, platform: str) -> str | None:
        check_platform(platform)
        return AUTO if platform in self._auto else self._defaults.get(platform)

    def fixed_default(self, platform: str) -> str | None:
        """The default of ``platform`` that is a backend, also where the default is "auto"."""
        check_platform(platform)
        return self._defaults.get(platform)

    @property
    def defaults(self) -> dict[str, str]:
        return {p: AUTO if p in self._auto else b for p, b in self._defaults.items()}

    def available(self, platform: str) -> tuple[str, ...]:
        check_platform(platform)
        return tuple(self._entries.get(platform, {}))

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

    def check_known(self, backend: Any) -> None:
        """Refuse a backend registered on no platform (a call's ``backend=``), and
        ``"auto"`` where no chooser is installed to make its choices."""
        if not isinstance(backend, str):
            raise TypeError(f"`backend` must be a str or None, got {type(backend)!r}")
        if backend == AUTO:
            require_chooser()
        elif not any(backend in e for e in self._entries.values()):
            raise UnknownBackendError(
                f"unknown backend {backend!r} for kernel {self.kernel_name!r}; registered: "
                f"{self.summary()}"
            )

    def select(self, platform: str, backend: str | None) -> str:
        """The backend a call on ``platform`` uses, or ``"auto"``: ``backend``
        when given, else the process-wide preference where registered (or
        "auto"), else the platform's default."""
        entries = self._entries.get(platform)
        if not entries:
            raise NoKernelError(
                f"no kernel registered for platform {platform!r} in {self.kernel_name!r}; "
                f"registered: {self.summary()}"
            )
        if backend is not None:
            return backend if backend == AUTO else self.check_backend(platform, backend).backend
        preferred = get_backend()
        if preferred is not None and (preferred == AUTO or preferred in entries):
            return preferred
        return AUTO if platform in self._auto else self._defaults[platform]

    def switch_hint(self, platform: str, failed: str) -> str:
        """How to switch away from backend ``failed`` on ``platform`` (for messages)."""
        others = [b for b in self._entries.get(platform, {}) if b != failed]
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
