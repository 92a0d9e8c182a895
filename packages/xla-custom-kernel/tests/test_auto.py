"""Backend "auto" as xla-custom-kernel sees it: names, defaults, and the
error without kernel-bench (the measuring is tested with kernel-bench)."""

from __future__ import annotations

import ast
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest
import xla_custom_kernel as xck
from xla_custom_kernel import _chooser

_NO_CHOOSER = (
    "backend 'auto' needs a chooser that measures the registered backends, and none is "
    "registered; kernel-bench provides one: install it with `pip install "
    '"xla-custom-kernel[bench]"` (from wheels built from the repository: `pip install '
    '--find-links DIR "xla-custom-kernel[bench]"`; in a uv project: `uv add '
    '"xla-custom-kernel[bench]"`), '
    "or pick a backend by name"
)


def test_auto_is_a_known_backend_name_and_a_default():
    k = xck.XLACustomKernel("auto_names")
    k.def_jax_kernel(lambda outs: lambda x: 2 * x, platform="cpu")
    with pytest.raises(xck.NoKernelError) as info:
        k.set_default("gpu", "auto")
    assert str(info.value) == (
        "no kernel registered for platform 'gpu' in 'auto_names' to choose from; "
        "registered: cpu: jax"
    )
    pytest.importorskip("kernel_bench")
    k.set_default("cpu", "auto")
    assert (k.get_default("cpu"), k.fixed_default("cpu")) == ("auto", "jax")
    assert k.defaults == {"cpu": "auto"}
    assert k.fixed_default("gpu") is None


_WITHOUT_KERNEL_BENCH = textwrap.dedent(
    """
    import sys
    sys.modules["kernel_bench"] = None  # as if it were not installed
    import jax, jax.numpy as jnp
    import xla_custom_kernel as xck

    k = xck.XLACustomKernel("auto_without_bench")
    k.def_jax_kernel(lambda outs: lambda x: 2 * x)
    attempts = [
        lambda: xck.set_backend("auto"),
        lambda: k.set_default("cpu", "auto"),
        lambda: k(jnp.ones(2), outs=jax.ShapeDtypeStruct((2,), jnp.float32), backend="auto"),
    ]
    for attempt in attempts:
        try:
            attempt()
        except ImportError as exc:
            print(exc)
        else:
            print("no error")
    print(xck.get_backend(), k.get_default("cpu"))
    """
)


def test_auto_without_kernel_bench_says_how_to_install_it():
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_KERNEL_BENCH], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [_NO_CHOOSER, _NO_CHOOSER, _NO_CHOOSER, "None jax"]


class _First:
    """A chooser that picks the last registered backend and remembers what it saw."""

    def __init__(self):
        self.sites = []

    def choose(self, site):
        self.sites.append(site)
        return site.backends[-1]

    def explain(self, site):
        return _Explained(site.backends[-1])

    def benchmark(self, kernel, **kwargs):
        return ("benchmarked", kernel.name, kwargs)


class _Explained:
    def __init__(self, backend):
        self.backend = backend

    def describe(self):
        return f"choice: {self.backend}"


@pytest.fixture
def no_chooser(monkeypatch):
    """No chooser registered and none installed."""
    monkeypatch.setattr(_chooser, "_chooser", None)
    monkeypatch.setattr(_chooser.importlib.metadata, "entry_points", lambda group: [])


def test_a_registered_chooser_picks_with_a_call_site(name, no_chooser, capsys):
    chooser = _First()
    xck.register_chooser(chooser)
    k = xck.XLACustomKernel(name)
    k.def_jax_kernel(lambda outs: lambda x: 2 * x, platform="cpu")
    k.def_kernel("plus", "cpu", lambda outs: lambda x: x + x)
    x = jnp.ones((2, 3), jnp.float32)
    y = jax.vmap(lambda x: k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), backend="auto"))(x)
    assert (y == 2).all()
    (site,) = chooser.sites
    assert (site.kernel, site.platform, site.backends, site.reference) == (
        k,
        "cpu",
        ("jax", "plus"),
        "jax",
    )
    assert (site.describe(), site.lead(0), site.multiple) == (
        "float32[2, 3]; vmap 2 over input 0",
        (2,),
        False,
    )
    assert re.fullmatch("[0-9a-f]{32}", site.key)
    # The runner runs the operation with a named backend on batched inputs.
    assert (site.runner("plus")(x)[0] == 2).all()
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"`backend` must be one of the backends of {name!r} on cpu ('jax', 'plus'), got 'nope'"
        ),
    ):
        site.runner("nope")
    assert k.explain(x[0], outs=jax.ShapeDtypeStruct((3,), jnp.float32)).backend == "plus"
    assert capsys.readouterr().out == "choice: plus\n"
    assert k.benchmark(platform="cpu") == ("benchmarked", name, {"platform": "cpu"})


def test_register_chooser_refuses_what_is_not_one_and_a_second_one(no_chooser):
    with pytest.raises(
        TypeError,
        match=re.escape(
            "`chooser` must have the methods choose(site), explain(site) and "
            "benchmark(kernel, **kwargs) of xla_custom_kernel.Chooser, or be None, got <class 'str'>"
        ),
    ):
        xck.register_chooser("autotune")
    first, second = _First(), _First()
    xck.register_chooser(first)
    xck.register_chooser(first)  # the same one again: nothing happens
    with pytest.raises(
        ValueError,
        match=re.escape(
            "a chooser is already registered (_First); pass replace=True to replace it"
        ),
    ):
        xck.register_chooser(second)
    xck.register_chooser(second, replace=True)
    assert xck.registered_chooser() is second
    xck.register_chooser(None)
    assert xck.registered_chooser() is None


class _EntryPoint:
    def __init__(self, name, loaded):
        self.name = name
        self._loaded = loaded

    def load(self):
        if isinstance(self._loaded, BaseException):
            raise self._loaded
        return self._loaded


def test_the_chooser_is_found_by_entry_point_group(monkeypatch, no_chooser):
    chooser = _First()
    groups = []

    def entry_points(group):
        groups.append(group)
        return [_EntryPoint("b", chooser), _EntryPoint("a", ImportError("broken"))]

    monkeypatch.setattr(_chooser.importlib.metadata, "entry_points", entry_points)
    assert xck.find_chooser() is chooser
    assert xck.registered_chooser() is chooser
    assert groups == [xck.CHOOSER_ENTRY_POINTS] == ["xla_custom_kernel.choosers"]


def test_without_a_chooser_auto_says_how_to_install_one(monkeypatch, no_chooser, name):
    broken = ImportError("No module named 'kernel_bench'")
    monkeypatch.setattr(
        _chooser.importlib.metadata,
        "entry_points",
        lambda group: [_EntryPoint("autotune", broken), _EntryPoint("x", object())],
    )
    with pytest.raises(ImportError, match=f"^{re.escape(_NO_CHOOSER)}$") as info:
        xck.set_backend("auto")
    assert info.value.__cause__ is broken
    k = xck.XLACustomKernel(name)
    k.def_jax_kernel(lambda outs: lambda x: x)
    for attempt in (
        lambda: k.benchmark(platform="cpu"),
        lambda: k.explain(jnp.ones(2), outs=jax.ShapeDtypeStruct((2,), jnp.float32)),
    ):
        with pytest.raises(ImportError, match=f"^{re.escape(_NO_CHOOSER)}$"):
            attempt()


def test_the_package_never_imports_kernel_bench():
    # The chooser comes through the hook: no import of the package that depends on this one.
    source = pathlib.Path(xck.__file__).parent
    for path in source.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.split(".")[0] == "kernel_bench" for n in names), path.name


_WITHOUT_IMPORTING_KERNEL_BENCH = textwrap.dedent(
    """
    import sys
    import jax, jax.numpy as jnp
    import xla_custom_kernel as xck

    k = xck.XLACustomKernel("auto_by_entry_point")
    k.def_jax_kernel(lambda outs: lambda x: 2 * x, platform="cpu")
    k.def_kernel("sum", "cpu", lambda outs: lambda x: x + x)
    before = "kernel_bench" in sys.modules
    y = k(jnp.ones(2), outs=jax.ShapeDtypeStruct((2,), jnp.float32), backend="auto")
    print(before, "kernel_bench.autotune" in sys.modules, repr(xck.registered_chooser()))
    print(y.tolist())
    """
)


def test_auto_finds_kernel_bench_by_its_entry_point(tmp_path):
    # The user never imports kernel_bench: the chooser comes from the entry point.
    pytest.importorskip("kernel_bench")
    env = {**os.environ, "KERNEL_BENCH_AUTOTUNE_DIR": str(tmp_path / "autotune")}
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_IMPORTING_KERNEL_BENCH],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "False True kernel_bench.autotune.CHOOSER",
        "[2.0, 2.0]",
    ]
