"""The backend adapter table: built-in backends, backends other packages add,
and the def_<name>_kernel methods an adapter gives every kernel."""

import ast
import dataclasses
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xla_custom_kernel as xck
from xla_custom_kernel import BackendAdapter, XLACustomKernel


def _kg(outs):
    return lambda x: x + 1


@pytest.fixture
def adapter_name(name):
    # Adapters are process-wide; give each test its own backend name.
    return re.sub(r"\W", "_", f"lang_{name}")


def test_builtin_adapters():
    table = xck.backend_adapters()
    assert {n: (a.platforms, a.batching, a.extra) for n, a in list(table.items())[:5]} == {
        "numba": (("cpu",), "vmap", "numba"),
        "numba_cuda": (("gpu",), "vmap", "numba-cuda"),
        "warp": (("cpu", "gpu"), "vmap", "warp"),
        "triton": (("gpu",), "vmap", "triton"),
        "cuda_raw": (("gpu",), "vmap", "cuda-raw"),
    }
    assert all(table[n].adapt is not None for n in ("numba", "warp", "triton", "cuda_raw"))
    assert table["numba_cuda"].adapt is None


def test_a_new_backend_gets_a_def_method_and_runs(name, adapter_name):
    seen = []

    def adapt(kernel, entry, fn, outs):
        seen.append((kernel.name, entry.backend, entry.platform, outs))
        return lambda x: fn(x) * 10

    xck.register_backend_adapter(BackendAdapter(adapter_name, ("cpu", "gpu"), "loop", adapt, "x"))
    op = XLACustomKernel(name)
    entries = getattr(op, f"def_{adapter_name}_kernel")(_kg)
    assert [(e.backend, e.platform, e.batching) for e in entries] == [
        (adapter_name, "cpu", "loop"),
        (adapter_name, "gpu", "loop"),
    ]
    assert op.defaults == {"cpu": adapter_name, "gpu": adapter_name}
    x = jax.device_put(jnp.arange(3.0), jax.devices("cpu")[0])  # also where a GPU is the default
    out = jax.jit(lambda x: op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)))(x)
    np.testing.assert_array_equal(out, (np.arange(3.0) + 1) * 10)
    assert seen == [(name, adapter_name, "cpu", jax.ShapeDtypeStruct((3,), jnp.float32))]
    assert xck.backend_adapters()[adapter_name].extra == "x"


def test_def_backend_kernel_with_one_platform_returns_the_entry(name):
    entry = XLACustomKernel(name).def_backend_kernel("numba_cuda", _kg)
    assert (entry.backend, entry.platform, entry.batching) == ("numba_cuda", "gpu", "vmap")


def test_registering_an_adapter_twice(adapter_name):
    xck.register_backend_adapter(BackendAdapter(adapter_name, ("cpu",)))
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"a backend adapter named {adapter_name!r} is already registered; pass "
            "replace=True to replace it"
        ),
    ):
        xck.register_backend_adapter(BackendAdapter(adapter_name, ("gpu",)))
    xck.register_backend_adapter(BackendAdapter(adapter_name, ("gpu",)), replace=True)
    assert xck.backend_adapters()[adapter_name].platforms == ("gpu",)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"name": "no-identifier", "platforms": ("cpu",)},
            ValueError,
            "`name` must be a str that is a Python identifier (it names the method "
            "def_<name>_kernel), got 'no-identifier'",
        ),
        (
            {"name": "ok", "platforms": ["cpu"]},
            TypeError,
            "`platforms` must be a non-empty tuple of 'cpu', 'gpu', 'tpu', got ['cpu']",
        ),
        (
            {"name": "ok", "platforms": ("cpu", "npu")},
            ValueError,
            "each of `platforms` must be one of 'cpu', 'gpu', 'tpu', got 'npu'",
        ),
        (
            {"name": "ok", "platforms": ("cpu",), "batching": "fold"},
            ValueError,
            "`batching` must be one of 'auto', 'vmap', 'loop', got 'fold'",
        ),
        (
            {"name": "ok", "platforms": ("cpu",), "adapt": 3},
            TypeError,
            "`adapt` must be callable or None, got <class 'int'>",
        ),
        (
            {"name": "ok", "platforms": ("cpu",), "extra": 3},
            TypeError,
            "`extra` must be a str or None, got <class 'int'>",
        ),
    ],
)
def test_bad_adapters(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        BackendAdapter(**kwargs)


def test_register_refuses_other_objects():
    with pytest.raises(
        TypeError, match=re.escape("`adapter` must be a BackendAdapter, got <class 'str'>")
    ):
        xck.register_backend_adapter("numba")


def test_unknown_backend_adapter(name):
    op = XLACustomKernel(name)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "no backend adapter named 'cobol'; register one with "
            "xla_custom_kernel.register_backend_adapter, or use def_kernel(backend, "
            "platform, kg)"
        ),
    ):
        op.def_backend_kernel("cobol", _kg)
    with pytest.raises(
        AttributeError,
        match=re.escape("'XLACustomKernel' object has no attribute 'def_cobol_kernel'"),
    ):
        op.def_cobol_kernel(_kg)


def test_modules_import_one_way():
    # Every import between the package's modules, TYPE_CHECKING ones too, runs
    # down a DAG: no module imports one that imports it back.
    src = pathlib.Path(xck.__file__).parent
    graph = {}
    for path in src.glob("_*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module)
                else:
                    deps.update(alias.name for alias in node.names)
        graph[path.stem] = deps
    order, state = [], {}

    def visit(module, chain):
        if state.get(module) == "done":
            return
        assert state.get(module) != "open", f"import circle: {' -> '.join([*chain, module])}"
        state[module] = "open"
        for dep in sorted(graph.get(module, ())):
            visit(dep, [*chain, module])
        state[module] = "done"
        order.append(module)

    for module in sorted(graph):
        visit(module, [])
    assert set(order) == set(graph)


def test_adapters_taking_static_get_the_calls_static_keywords(name, adapter_name):
    seen = []

    def adapt(kernel, entry, fn, outs, *, static):
        seen.append(static)
        return fn

    xck.register_backend_adapter(xck.BackendAdapter(adapter_name, ("cpu",), "loop", adapt))
    k = XLACustomKernel(name)
    getattr(k, f"def_{adapter_name}_kernel")(lambda outs, scale: lambda x: scale * x)
    x = jnp.ones(3, jnp.float32)
    np.testing.assert_array_equal(
        k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), scale=2.0), 2 * x
    )
    assert seen == [{"scale": 2.0}]


def test_triton_and_cuda_raw_adapters_wrap_bare_kernels(monkeypatch):
    # On a GPU-less machine the wrapped ops refuse to run, naming the platform:
    # what matters here is that the adapters built them from bare kernels.
    triton_ffi = pytest.importorskip("triton_ffi")
    cuda_source_ffi = pytest.importorskip("cuda_source_ffi")
    from xla_custom_kernel._adapters import adapt_cuda_raw, adapt_triton

    made = {}

    def fake_triton_kernel(fn, outs, **config):
        made["triton"] = (fn, outs, config)
        return lambda *args, **scalars: ("triton", args, scalars)

    monkeypatch.setattr(triton_ffi, "triton_kernel", fake_triton_kernel)
    import triton

    @triton.jit
    def k(x_ptr, out_ptr, n, BLOCK: triton.language.constexpr):
        pass

    call = adapt_triton(None, None, (k, {"grid": 2, "BLOCK": 8}), "OUTS", static={"n": 5, "z": 1})
    assert made["triton"] == (k, "OUTS", {"grid": 2, "BLOCK": 8})
    assert call(1, 2) == ("triton", (1, 2), {"n": 5})

    module = cuda_source_ffi.load_cuda_inline(
        'extern "C" __global__ void f(const float* x, float* y, int n) {}',
        kernels={"f": ["in", "out", "n:int32"]},
    )
    made_raw = {}
    monkeypatch.setattr(
        type(module),
        "kernel",
        lambda self, name, outs, **launch: (
            made_raw.update(args=(name, outs, launch)) or (lambda *a, **s: ("raw", a, s))
        ),
    )
    call = adapt_cuda_raw(None, None, (module, "f", {"grid": 1, "block": 32}), "O", static={"n": 3})
    assert made_raw["args"] == ("f", "O", {"grid": 1, "block": 32})
    assert call(7) == ("raw", (7,), {"n": 3})
    # Anything else is kept as it is.
    other = object()
    assert adapt_triton(None, None, other, "O") is other
    assert adapt_cuda_raw(None, None, other, "O") is other


SEED_METHODS = {
    # method: (backend, the bridge package, the extra)
    "def_numba_kernel": ("numba", "numba-cpu-ffi", "numba"),
    "def_numba_cuda_kernel": ("numba_cuda", "numba-cuda-ffi", "numba-cuda"),
    "def_warp_kernel": ("warp", "warp-ffi", "warp"),
    "def_triton_kernel": ("triton", "triton-ffi", "triton"),
    "def_cuda_raw_kernel": ("cuda_raw", "cuda-source-ffi", "cuda-raw"),
}


def test_every_seed_backend_has_a_documented_method():
    for method in [*SEED_METHODS, "def_pallas_kernel", "def_jax_kernel"]:
        # Defined on the class (help() and dir() show it), not made by __getattr__.
        assert method in dir(XLACustomKernel), method
        assert getattr(XLACustomKernel, method).__doc__, method


@pytest.mark.parametrize("method", SEED_METHODS)
def test_a_seed_method_registers_an_absent_bridge_as_unavailable(method, name, monkeypatch):
    # Registered all the same; the ImportError naming the extra comes only
    # where the backend would run (tests/test_unavailable_backends.py).
    from xla_custom_kernel import _adapters

    backend, package, extra = SEED_METHODS[method]
    module = package.replace("-", "_")
    table = dict(_adapters._adapters)
    absent = dataclasses.replace(table[backend], module=f"{module}_not_installed")
    monkeypatch.setattr(_adapters, "_adapters", {**table, backend: absent})
    k = XLACustomKernel(name)
    entries = getattr(k, method)(_kg)
    platforms = absent.platforms
    assert [e.platform for e in (entries if isinstance(entries, tuple) else (entries,))] == list(
        platforms
    )
    reason = f'{package}-not-installed is not installed; install it with `pip install "xla-custom-kernel[{extra}]"` (from wheels built from the repository: `pip install --find-links DIR "xla-custom-kernel[{extra}]"`; in a uv project: `uv add "xla-custom-kernel[{extra}]"`)'
    for platform in platforms:
        assert k.available_backends(platform) == []
        assert k.unavailable_backends(platform) == {backend: reason}
        assert list(k._kernels[platform]) == [backend]
    message = (
        f"backend {backend!r} of kernel {name!r} (chosen for the call) needs "
        f"{package}-not-installed, which is not installed; install it with `pip install "
        f'"xla-custom-kernel[{extra}]"` (from wheels built from the repository: '
        f'`pip install --find-links DIR "xla-custom-kernel[{extra}]"`; in a uv project: `uv add "xla-custom-kernel[{extra}]"`)'
    )
    x = jnp.ones(2)
    with pytest.raises(ImportError, match=f"^{re.escape(message)}$"):
        k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), backend=backend)

    monkeypatch.setattr(_adapters, "_adapters", {n: a for n, a in table.items() if n != backend})
    message = (
        f"def_{backend}_kernel of kernel {name + '_2'!r} needs the adapter of backend "
        f"{backend!r}, which is not registered; register one with "
        "xla_custom_kernel.register_backend_adapter"
    )
    with pytest.raises(ImportError, match=f"^{re.escape(message)}$"):
        getattr(XLACustomKernel(name + "_2"), method)(_kg)


def test_an_import_error_that_says_how_to_install_says_it_once(name, adapter_name):
    from xla_custom_kernel._adapters import install_hint

    def adapt(kernel, entry, fn, outs):
        raise ImportError(f"{adapter_name} kernels need its bridge; {install_hint(adapter_name)}")

    xck.register_backend_adapter(BackendAdapter(adapter_name, ("cpu",), "vmap", adapt, "x"))
    k = XLACustomKernel(name)
    getattr(k, f"def_{adapter_name}_kernel")(_kg)
    x = jnp.ones(2)
    with pytest.raises(xck.BackendError) as info:
        k(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))
    assert str(info.value) == (
        f"backend {adapter_name!r} of kernel {name!r} failed on platform 'cpu': ImportError: "
        f"{adapter_name} kernels need its bridge; install it with `pip install "
        '"xla-custom-kernel[x]"` (from wheels built from the repository: `pip install '
        '--find-links DIR "xla-custom-kernel[x]"`; in a uv project: `uv add '
        '"xla-custom-kernel[x]"`). No other backend is '
        f"registered for cpu; register one, for example with get_kernel({name!r})"
        ".def_jax_kernel(...)"
    )
