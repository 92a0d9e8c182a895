"""``BenchmarkConfig``: one benchmark case of a kernel, its inputs and static keywords."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BACKEND_PLATFORMS", "BenchmarkConfig"]

#: JAX backend names a kernel backend runs on (``jax.default_backend()``).
BACKEND_PLATFORMS: tuple[str, ...] = ("cpu", "gpu", "tpu")


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
    """One case to benchmark: the input arrays and the keywords of the call.

    A function registered with ``XLACustomKernel.def_benchmark_data`` returns
    an iterable of these; every backend of the kernel runs every case as
    ``kernel.call(*args, backend=..., **kernel_kwargs)``, with ``kernel_kwargs``
    bound statically under ``jax.jit``.

    Args:
        name: a short name of the case, unique among the kernel's cases
            (e.g. ``"n=1000,p=0.01"``); records are labelled ``"<kernel>/<name>"``.
        args: the positional inputs, arrays or pytrees of arrays.
        kernel_kwargs: static keywords of the call (ints, floats, strings,
            dtypes, tuples); they must be hashable.
        data_kwargs: what describes the data (sizes, density...), kept in the
            records for reports; not passed to the kernel.

    Example:
        >>> import jax.numpy as jnp
        >>> cfg = BenchmarkConfig("n=4", (jnp.ones(4),), data_kwargs={"n": 4})
        >>> cfg.name, len(cfg.args), cfg.kernel_kwargs, cfg.data_kwargs
        ('n=4', 1, {}, {'n': 4})
    """

    name: str
    args: tuple[Any, ...]
    kernel_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    data_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"`name` must be a non-empty str, got {self.name!r}")
        if isinstance(self.args, str | bytes | Mapping) or not isinstance(self.args, Sequence):
            raise TypeError(
                f"`args` of benchmark case '{self.name}' must be a tuple or list of the "
                f"kernel's inputs, got {type(self.args)!r}"
            )
        object.__setattr__(self, "args", tuple(self.args))
        for field in ("kernel_kwargs", "data_kwargs"):
            value = getattr(self, field)
            if not isinstance(value, Mapping):
                raise TypeError(
                    f"`{field}` of benchmark case '{self.name}' must be a dict, got {type(value)!r}"
                )
            bad = [k for k in value if not isinstance(k, str)]
            if bad:
                raise TypeError(
                    f"`{field}` of benchmark case '{self.name}' must have str keys, got {bad[0]!r}"
                )
            object.__setattr__(self, field, dict(value))
