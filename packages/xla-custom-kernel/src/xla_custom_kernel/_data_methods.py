"""The methods of ``XLACustomKernel`` that hold what is about an operation
rather than its kernels: its tags, its benchmark data and its autotune data."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._platforms import check_platform

__all__ = ["DataMethods"]


class DataMethods:
    """Tags, benchmark and autotune data, mixed into ``XLACustomKernel``."""

    name: str
    _tag_order: tuple[str, ...]
    _benchmark_data_fn: Callable[..., Any] | None
    _autotune_data_fn: Callable[..., Any] | None

    def def_tags(self, *tags: str) -> None:
        """Set the kernel's tags, replacing those set before, as the seed API does
        (for :func:`registered_kernels` and ``kernel-bench run --tags``); a tag
        given twice is kept once."""
        for t in tags:
            if not isinstance(t, str):
                raise TypeError(f"tags must be str, got {type(t)!r}")
        self._tag_order = tuple(dict.fromkeys(tags))

    @property
    def tags(self) -> tuple[str, ...]:
        """The tags set with :meth:`def_tags`, in order."""
        return self._tag_order

    @property
    def _tags(self) -> set[str]:
        # The seed's attribute (a set), read by code written against it.
        return set(self._tag_order)

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

    def def_autotune_data(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Register ``fn(*inputs, outs, **static)`` making the input arrays the
        autotuner times the backends on, for one unbatched call: ``inputs`` are
        ``jax.ShapeDtypeStruct``s, ``outs`` as the generator gets them. Without
        it, floating inputs are random and integer and bool inputs zero, which
        is safe for index arrays but may time little work (an empty sparse
        matrix, say); register one for operations whose integer inputs matter."""
        if not callable(fn):
            raise TypeError(f"`fn` must be callable, got {type(fn)!r}")
        self._autotune_data_fn = fn
        return fn

    def autotune_data(self, inputs: Sequence[Any], outs: Any, static: dict[str, Any]) -> Any:
        """The arrays registered with :meth:`def_autotune_data` make for
        ``inputs`` (structs), or None when none is registered."""
        if self._autotune_data_fn is None:
            return None
        return self._autotune_data_fn(*inputs, outs=outs, **static)
