"""A small stand-in for XLACustomKernel: the duck-typed interface kernel-bench relies on."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest


class FakeKernel:
    """A kernel with named backends on one platform and fixed benchmark cases."""

    def __init__(
        self,
        name: str,
        backends: dict[str, Callable[..., Any]],
        cases: Iterable[Any] | Callable[[], Iterable[Any]] | None = None,
        *,
        tags: tuple[str, ...] = (),
        default: str | None = None,
        platform: str = "cpu",
        has_call: bool = True,
    ) -> None:
        self.name = name
        self.tags = tags
        self.doc = None
        self.backends = backends
        self.cases = cases
        self.default = default
        self.platform = platform
        self.has_call = has_call
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def available_backends(self, platform: str) -> tuple[str, ...]:
        return tuple(self.backends) if platform == self.platform else ()

    def get_default(self, platform: str) -> str | None:
        if platform != self.platform:
            return None
        return self.default or next(iter(self.backends), None)

    def call(self, *args: Any, backend: str | None = None, **kwargs: Any) -> Any:
        if not self.has_call:
            raise ValueError(f"kernel '{self.name}' has no call function")
        self.calls.append((backend, kwargs))
        return self.backends[backend or self.get_default(self.platform)](*args, **kwargs)

    @property
    def has_benchmark_data(self) -> bool:
        return self.cases is not None

    def benchmark_data(self, *, platform: str) -> list[Any]:
        if self.cases is None:
            raise ValueError(f"kernel '{self.name}' has no benchmark data")
        return list(self.cases() if callable(self.cases) else self.cases)


@pytest.fixture
def fake_kernel() -> type[FakeKernel]:
    return FakeKernel


@pytest.fixture(autouse=True)
def _autotune_state(tmp_path, monkeypatch):
    # Each test decides afresh: its own cache directory on disk, nothing in
    # memory, the default budget, fresh counts.
    from kernel_bench import autotune
    from kernel_bench.autotune import _cache as _autotune_cache
    from kernel_bench.autotune import _decide as _autotune_decide
    from kernel_bench.autotune import _location

    monkeypatch.setenv(autotune.CACHE_ENV, str(tmp_path / "autotune-cache"))
    monkeypatch.setattr(_autotune_decide, "_memory", {})
    monkeypatch.setattr(_autotune_cache, "_disk", {})
    monkeypatch.setattr(_location, "_refused", set())
    monkeypatch.setattr(_autotune_decide, "_stats", dict.fromkeys(_autotune_decide._stats, 0))
    monkeypatch.setattr(_autotune_decide, "_budget_s", 0.05)
    yield


@pytest.fixture
def autotune_costs(monkeypatch):
    """Deterministic timing for the autotuner: the dict returned maps a backend
    to its microseconds per call, a number (every round the same) or a list
    (round r takes item r, cycling); backends not in it cost 100. The
    backends still run (their results are checked); only the clock is fake.
    ``autotune_costs.rounds`` lists the backends of each timing call;
    ``autotune_costs.load`` is the load of other processes the autotuner
    sees (None: unknown, as on a machine without ``/proc/stat``)."""
    import itertools

    from kernel_bench.autotune import _decide as _autotune_decide
    from kernel_bench.autotune import _measure as _autotune_measure

    class Costs(dict):
        rounds: list[list[str]]
        load: float | None

    costs = Costs()
    costs.rounds = []
    costs.load = None

    class Load:
        def share(self):
            return costs.load

    def interleaved(runs, counts, data, *, rounds, seconds=0.0, min_rounds=1):
        costs.rounds.append(list(runs))
        found = {}
        for backend in runs:
            cost = costs.get(backend, 100.0)
            series = cost if isinstance(cost, list) else [cost]
            found[backend] = [float(t) for t in itertools.islice(itertools.cycle(series), rounds)]
        return found

    monkeypatch.setattr(_autotune_measure, "interleaved", interleaved)
    monkeypatch.setattr(_autotune_measure, "calls_per_run", lambda run, data, seconds: 10)
    monkeypatch.setattr(_autotune_measure, "OtherLoad", Load)
    monkeypatch.setattr(_autotune_decide, "load_known", lambda: costs.load is not None)
    return costs
