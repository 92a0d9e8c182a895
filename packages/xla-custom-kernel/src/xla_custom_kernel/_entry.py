"""``KernelEntry``: one backend registered for one platform."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["BATCHING_MODES", "KernelEntry"]

#: How a backend runs under ``vmap``: ``"vmap"``: the callable the generator
#: returns is vmapped (one call for the batch where its operations batch
#: natively); ``"loop"``: one call per batch element in one XLA loop;
#: ``"auto"``: ``"vmap"`` when the callable can be vmapped, else ``"loop"``.
BATCHING_MODES = ("auto", "vmap", "loop")


@dataclasses.dataclass(frozen=True)
class KernelEntry:
    """One registration: ``generator`` makes the kernel of ``backend`` on ``platform``.

    Attributes:
        backend: the backend's name ("numba", "jax", ...).
        platform: "cpu", "gpu" or "tpu".
        generator: ``generator(outs=..., **static_kwargs)`` returns a callable
            taking the input arrays and returning the outputs.
        batching: one of :data:`BATCHING_MODES`.
        adapt: turns what the generator returned into that callable (for
            example wraps a bare ``@numba.njit`` function); None keeps it.
        module: the import name of the bridge package the backend needs (for
            example ``"warp_ffi"``), from its adapter; where it is not
            installed the entry is registered but unavailable (see
            ``XLACustomKernel.unavailable_backends``). None: nothing needed.
    """

    backend: str
    platform: str
    generator: Callable[..., Any]
    batching: str = "auto"
    adapt: Callable[..., Any] | None = dataclasses.field(default=None, repr=False)
    module: str | None = dataclasses.field(default=None, repr=False)

    @property
    def kernel_generator(self) -> Callable[..., Any]:
        """``generator``, under the name the seed API's ``KernelEntry`` gives it."""
        return self.generator
