import re

import pytest
from xla_custom_kernel import XLACustomKernel, _chooser


def test_benchmark_without_kernel_bench(name, monkeypatch):
    k = XLACustomKernel(name)
    k.def_jax_kernel(lambda outs: lambda x: x)
    # No chooser registered, none installed.
    monkeypatch.setattr(_chooser, "_chooser", None)
    monkeypatch.setattr(_chooser.importlib.metadata, "entry_points", lambda group: [])
    with pytest.raises(
        ImportError,
        match=re.escape(
            "backend 'auto' needs a chooser that measures the registered backends, and none is "
            "registered; kernel-bench provides one: install it with `pip install "
            '"xla-custom-kernel[bench]"` (from wheels built from the repository: `pip install '
            '--find-links DIR "xla-custom-kernel[bench]"`; in a uv project: `uv add '
            '"xla-custom-kernel[bench]"`), '
            "or pick a backend by name"
        ),
    ):
        k.benchmark(platform="cpu")


def test_benchmark_data(name):
    k = XLACustomKernel(name)
    assert not k.has_benchmark_data
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"kernel {name!r} has no benchmark data; register a function returning "
            f"kernel_bench.BenchmarkConfig objects with @{name}.def_benchmark_data"
        ),
    ):
        k.benchmark_data(platform="cpu")

    @k.def_benchmark_data
    def data(*, platform):
        yield f"{platform}-small"
        yield f"{platform}-large"

    assert k.has_benchmark_data
    assert k.benchmark_data(platform="gpu") == ["gpu-small", "gpu-large"]
    with pytest.raises(
        ValueError, match=re.escape("`platform` must be one of 'cpu', 'gpu', 'tpu', got 'cuda'")
    ):
        k.benchmark_data(platform="cuda")
