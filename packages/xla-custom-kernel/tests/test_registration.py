import importlib.util
import re

import pytest
import xla_custom_kernel as xck
from xla_custom_kernel import KernelEntry, UnknownBackendError, XLACustomKernel


def _kg(outs):
    return lambda x: x


def test_def_kernel_returns_entry(name):
    k = XLACustomKernel(name)
    entry = k.def_kernel("mine", "cpu", _kg, batching="loop")
    assert entry == KernelEntry("mine", "cpu", _kg, "loop")
    assert (entry.backend, entry.platform, entry.generator, entry.batching, entry.adapt) == (
        "mine",
        "cpu",
        _kg,
        "loop",
        None,
    )
    assert k.available_backends("cpu") == ["mine"]
    assert k.available_backends("gpu") == []


def test_def_numba_kernel_records_cpu_entry_with_adapter(name):
    k = XLACustomKernel(name)
    entry = k.def_numba_kernel(_kg)
    assert (entry.backend, entry.platform, entry.batching) == ("numba", "cpu", "vmap")
    assert entry.adapt is not None
    assert k.get_default("cpu") == "numba"


def test_def_jax_kernel_without_platform_registers_every_platform(name):
    k = XLACustomKernel(name)
    entries = k.def_jax_kernel(_kg)
    assert [(e.backend, e.platform, e.batching) for e in entries] == [
        ("jax", "cpu", "vmap"),
        ("jax", "gpu", "vmap"),
        ("jax", "tpu", "vmap"),
    ]
    assert k.defaults == {"cpu": "jax", "gpu": "jax", "tpu": "jax"}


@pytest.mark.parametrize("platform", xck.BACKEND_PLATFORMS)
def test_def_jax_kernel_on_one_platform(name, platform):
    k = XLACustomKernel(name)
    (entry,) = k.def_jax_kernel(_kg, platform=platform)
    assert entry.platform == platform
    assert k.defaults == {platform: "jax"}


@pytest.mark.parametrize(
    ("method", "backend", "batching", "bridge"),
    [
        ("def_numba_cuda_kernel", "numba_cuda", "vmap", "numba_cuda_ffi"),
        ("def_triton_kernel", "triton", "vmap", "triton_ffi"),
        ("def_cuda_raw_kernel", "cuda_raw", "vmap", "cuda_source_ffi"),
    ],
)
def test_gpu_shorthands_record_gpu_entries(name, method, backend, batching, bridge):
    # Recorded whether or not the bridge is installed (unavailable where it is not).
    k = XLACustomKernel(name)
    entry = getattr(k, method)(_kg)
    assert (entry.backend, entry.platform, entry.batching, entry.module) == (
        backend,
        "gpu",
        batching,
        bridge,
    )
    installed = importlib.util.find_spec(bridge) is not None
    assert k.available_backends("gpu") == ([backend] if installed else [])
    assert list(k.unavailable_backends("gpu")) == ([] if installed else [backend])
    assert k.available_backends("cpu") == []
    assert k.defaults == {"gpu": backend}


def test_def_warp_kernel_registers_cpu_and_gpu(name):
    k = XLACustomKernel(name)
    entries = k.def_warp_kernel(_kg)
    assert [(e.backend, e.platform, e.batching) for e in entries] == [
        ("warp", "cpu", "vmap"),
        ("warp", "gpu", "vmap"),
    ]
    assert k.defaults == {"cpu": "warp", "gpu": "warp"}


@pytest.mark.parametrize("platform", ["gpu", "tpu"])
def test_def_pallas_kernel(name, platform):
    k = XLACustomKernel(name)
    entry = k.def_pallas_kernel(platform, _kg)
    assert (entry.backend, entry.platform, entry.batching) == ("pallas", platform, "auto")


def test_def_pallas_kernel_refuses_cpu(name):
    k = XLACustomKernel(name)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`platform` of a Pallas kernel must be 'gpu' or 'tpu', got 'cpu'; Pallas runs on "
            "CPU only in interpret mode: def_pallas_kernel('cpu', kg, interpret=True) "
            "registers kg for tests and development and passes it interpret=True, which "
            "kg must pass on to pallas_call"
        ),
    ):
        k.def_pallas_kernel("cpu", _kg)
    assert k.available_backends("cpu") == []


def test_first_registered_is_default_and_asdefault_overrides(name):
    k = XLACustomKernel(name)
    k.def_kernel("a", "cpu", _kg)
    k.def_kernel("b", "cpu", _kg)
    assert k.get_default("cpu") == "a"
    k.def_kernel("c", "cpu", _kg, asdefault=True)
    assert k.get_default("cpu") == "c"
    assert k.available_backends("cpu") == ["a", "b", "c"]
    assert k.get_default("gpu") is None


def test_asdefault_of_shorthand(name):
    k = XLACustomKernel(name)
    k.def_jax_kernel(_kg)
    k.def_numba_kernel(_kg, asdefault=True)
    assert k.defaults == {"cpu": "numba", "gpu": "jax", "tpu": "jax"}


def test_duplicate_backend_on_platform_refused(name):
    k = XLACustomKernel(name)
    k.def_kernel("a", "cpu", _kg)
    k.def_kernel("a", "gpu", _kg)  # another platform is fine
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"backend 'a' is already registered for platform 'cpu' of kernel {name!r}; "
            "each backend is registered once"
        ),
    ):
        k.def_kernel("a", "cpu", _kg)


def test_duplicate_jax_kernel_refused(name):
    k = XLACustomKernel(name)
    k.def_jax_kernel(_kg, platform="gpu")
    with pytest.raises(ValueError, match="backend 'jax' is already registered for platform 'gpu'"):
        k.def_jax_kernel(_kg)


def test_defaults_is_a_copy(name):
    k = XLACustomKernel(name)
    k.def_kernel("a", "cpu", _kg)
    d = k.defaults
    d["cpu"] = "zzz"
    d["gpu"] = "zzz"
    assert k.defaults == {"cpu": "a"}
    assert k.defaults is not k.defaults


def test_set_default(name):
    k = XLACustomKernel(name)
    k.def_kernel("a", "cpu", _kg)
    k.def_kernel("b", "cpu", _kg)
    k.set_default("cpu", "b")
    assert k.get_default("cpu") == "b"
    assert k.defaults == {"cpu": "b"}


def test_set_default_unknown_backend(name):
    k = XLACustomKernel(name)
    k.def_kernel("a", "cpu", _kg)
    k.def_kernel("b", "gpu", _kg)
    with pytest.raises(
        UnknownBackendError,
        match=re.escape(
            f"unknown backend 'b' for platform 'cpu' of kernel {name!r}; registered for cpu: 'a'"
        ),
    ):
        k.set_default("cpu", "b")
    with pytest.raises(
        UnknownBackendError,
        match=re.escape(
            f"unknown backend 'a' for platform 'tpu' of kernel {name!r}; registered for tpu: none"
        ),
    ):
        k.set_default("tpu", "a")
    assert issubclass(UnknownBackendError, ValueError)
    assert k.defaults == {"cpu": "a", "gpu": "b"}


def test_set_default_backend_type(name):
    k = XLACustomKernel(name)
    k.def_kernel("a", "cpu", _kg)
    with pytest.raises(TypeError, match=re.escape("`backend` must be a str, got <class 'int'>")):
        k.set_default("cpu", 1)


@pytest.mark.parametrize("method", ["set_default", "get_default", "available_backends"])
def test_bad_platform(name, method):
    k = XLACustomKernel(name)
    k.def_kernel("a", "cpu", _kg)
    args = ("a",) if method == "set_default" else ()
    with pytest.raises(
        ValueError,
        match=re.escape("`platform` must be one of 'cpu', 'gpu', 'tpu', got 'cuda'"),
    ):
        getattr(k, method)("cuda", *args)
    with pytest.raises(
        TypeError,
        match=re.escape("`platform` must be a str, one of 'cpu', 'gpu', 'tpu', got <class 'int'>"),
    ):
        getattr(k, method)(0, *args)


def test_def_kernel_bad_platform(name):
    k = XLACustomKernel(name)
    with pytest.raises(
        ValueError, match=re.escape("`platform` must be one of 'cpu', 'gpu', 'tpu', got 'rocm'")
    ):
        k.def_kernel("a", "rocm", _kg)
    with pytest.raises(
        ValueError, match=re.escape("`platform` must be one of 'cpu', 'gpu', 'tpu', got 'x'")
    ):
        k.def_jax_kernel(_kg, platform="x")


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (("", "cpu", _kg), {}, TypeError, "`backend` must be a non-empty str, got ''"),
        ((3, "cpu", _kg), {}, TypeError, "`backend` must be a non-empty str, got 3"),
        (
            ("a", "cpu", 3),
            {},
            TypeError,
            "`kg` must be a callable kernel generator kg(outs=..., **kwargs), got <class 'int'>",
        ),
        (
            ("a", "cpu", _kg),
            {"batching": "scan"},
            ValueError,
            "`batching` must be one of 'auto', 'vmap', 'loop', got 'scan'",
        ),
        (("a", "cpu", _kg, 1), {}, TypeError, "`asdefault` must be a bool, got <class 'int'>"),
        (
            ("auto", "cpu", _kg),
            {},
            ValueError,
            "`backend` 'auto' names the autotuner's choice among the registered backends; "
            "register the backends under names of their own",
        ),
    ],
)
def test_def_kernel_bad_arguments(name, args, kwargs, error, message):
    k = XLACustomKernel(name)
    with pytest.raises(error, match=re.escape(message)):
        k.def_kernel(*args, **kwargs)
    assert k.available_backends("cpu") == []
    assert k.defaults == {}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": ""}, "`name` must be a non-empty str, got ''"),
        ({"name": 3}, "`name` must be a non-empty str, got 3"),
        ({"doc": 3}, "`doc` must be a str or None, got <class 'int'>"),
    ],
)
def test_constructor_bad_arguments(name, kwargs, message):
    with pytest.raises(TypeError, match=re.escape(message)):
        XLACustomKernel(**{"name": name, **kwargs})


def test_doc_and_repr(name):
    k = XLACustomKernel(name, doc="x times two")
    assert k.doc == k.__doc__ == "x times two"
    assert repr(k) == f"XLACustomKernel({name!r}; no kernels)"
    k.def_kernel("a", "cpu", _kg)
    k.def_jax_kernel(_kg)
    assert repr(k) == f"XLACustomKernel({name!r}; cpu: a, jax; gpu: jax; tpu: jax)"
    assert k.primitive.name == name
    assert k.primitive.multiple_results


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("def_batching_rule", "`fun` must be callable, got <class 'int'>"),
        ("def_jvp_rule", "`fun` must be callable, got <class 'int'>"),
        ("def_transpose_rule", "`fun` must be callable, got <class 'int'>"),
        ("def_call", "`fn` must be callable, got <class 'int'>"),
        ("def_benchmark_data", "`fn` must be callable, got <class 'int'>"),
        (
            "def_jvp_rule2",
            "JVP rules must be callables, None (a zero derivative) or "
            "xla_custom_kernel.NOT_DIFFERENTIABLE, got <class 'int'>",
        ),
    ],
)
def test_rule_registration_refuses_non_callables(name, rule, message):
    k = XLACustomKernel(name)
    with pytest.raises(TypeError, match=re.escape(message)):
        getattr(k, rule)(1)


def test_a_kernel_given_where_its_generator_belongs(name):
    numba = pytest.importorskip("numba")

    @numba.njit
    def add(x, y, out):
        out[:] = x + y

    k = XLACustomKernel(name)
    message = (
        "`kg` must be a kernel generator kg(outs=..., **kwargs) returning the kernel, got a "
        "Numba kernel (a @numba.njit or @cuda.jit function) itself; pass "
        "`lambda outs, **kwargs: kernel`"
    )
    with pytest.raises(TypeError, match=re.escape(message)):
        k.def_numba_kernel(add)
    with pytest.raises(TypeError, match=re.escape(message)):
        k.def_kernel("numba", "cpu", add)
    assert k.available_backends("cpu") == []
