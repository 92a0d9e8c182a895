"""A Pallas backend beside a numba one: registered for "gpu" (compiled there) and
for "cpu" in interpret mode, which is how it is tested on a machine without a
GPU. Both backends are compared with a jnp reference under jit, vmap and grad.
"""

import pathlib
import re

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
import xla_custom_kernel as xck
from jax.experimental import pallas as pl

PACKAGE = pathlib.Path(__file__).parents[1]
BACKENDS = ["numba", "pallas"]


@numba.njit
def _softmax_numba(x, out):
    for i in range(x.shape[0]):
        m = x[i, 0]
        for j in range(x.shape[1]):
            m = max(m, x[i, j])
        total = 0.0
        for j in range(x.shape[1]):
            out[i, j] = np.exp(x[i, j] - m)
            total += out[i, j]
        for j in range(x.shape[1]):
            out[i, j] /= total


def _softmax_body(x_ref, o_ref):
    x = x_ref[...]
    e = jnp.exp(x - x.max(axis=-1, keepdims=True))
    o_ref[...] = e / e.sum(axis=-1, keepdims=True)


def _softmax_pallas(outs, *, interpret=False):
    return pl.pallas_call(_softmax_body, out_shape=outs, interpret=interpret)


def _make(name):
    """Row-wise softmax with numba (cpu) and pallas (gpu; cpu interpreted) backends."""
    op = xck.XLACustomKernel(name)
    op.def_numba_kernel(lambda outs: _softmax_numba)
    op.def_pallas_kernel("gpu", _softmax_pallas)
    op.def_pallas_kernel("cpu", _softmax_pallas, interpret=True)

    @op.def_jvp_rule
    def _jvp(primals, tangents, *, outs):
        (x,), (t,) = primals, tangents
        y = op(x, outs=outs)
        # Linear in t with y a primal: reverse mode needs no transpose rule.
        return y, y * (t - (y * t).sum(axis=-1, keepdims=True))

    return op


def _call(op, backend):
    return lambda x: op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), backend=backend)


def _softmax(x):
    return jax.nn.softmax(x, axis=-1)


# On the CPU also where a GPU is the default device: the cpu backends run.
CPU = jax.devices("cpu")[0]
X = jax.device_put(jax.random.normal(jax.random.key(0), (4, 8)), CPU)
XS = jax.device_put(jax.random.normal(jax.random.key(1), (3, 4, 8)), CPU)
W = jnp.linspace(-1.0, 1.0, 8)


def test_registration_on_gpu_and_cpu(name):
    op = _make(name)
    assert op.available_backends("cpu") == ["numba", "pallas"]
    assert op.available_backends("gpu") == ["pallas"]
    assert op.defaults == {"cpu": "numba", "gpu": "pallas"}


def test_the_registration_decides_interpret(name):
    seen = []

    def kg(outs, *, interpret=False, **static):
        seen.append((interpret, static))
        return _softmax_pallas(outs, interpret=interpret)

    op = xck.XLACustomKernel(name)
    gpu = op.def_pallas_kernel("gpu", kg)
    cpu = op.def_pallas_kernel("cpu", kg, interpret=True)
    assert (gpu.backend, gpu.platform, gpu.batching) == ("pallas", "gpu", "auto")
    assert (cpu.backend, cpu.platform, cpu.batching) == ("pallas", "cpu", "auto")
    out = jax.ShapeDtypeStruct(X.shape, X.dtype)
    gpu.generator(outs=out, k=1)
    cpu.generator(outs=out, k=2)
    assert seen == [(False, {"k": 1}), (True, {"k": 2})]


def test_seed_signature_registers_a_generator_without_interpret(name):
    op = xck.XLACustomKernel(name)

    def kg(outs):
        return _softmax_pallas(outs)

    entry = op.def_pallas_kernel("tpu", kg, True)
    assert entry.generator is kg
    assert op.defaults == {"tpu": "pallas"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_jit(name, backend):
    op = _make(name)
    np.testing.assert_allclose(jax.jit(_call(op, backend))(X), _softmax(X), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pallas_matches_numba_under_jit(name, backend):
    op = _make(name)
    other = "numba" if backend == "pallas" else "pallas"
    np.testing.assert_allclose(
        jax.jit(_call(op, backend))(X), jax.jit(_call(op, other))(X), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("in_axes", [0, 1])
def test_vmap(name, backend, in_axes):
    op = _make(name)
    xs = jnp.moveaxis(XS, 0, in_axes)
    got = jax.jit(jax.vmap(_call(op, backend), in_axes=in_axes))(xs)
    np.testing.assert_allclose(got, _softmax(XS), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_vmap(name, backend):
    op = _make(name)
    xss = jax.device_put(jnp.stack([XS, 2 * XS]), CPU)
    got = jax.vmap(jax.vmap(_call(op, backend)))(xss)
    np.testing.assert_allclose(got, _softmax(xss), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad(name, backend):
    op = _make(name)
    call = _call(op, backend)
    got = jax.jit(jax.grad(lambda x: (call(x) * W).sum()))(X)
    want = jax.grad(lambda x: (_softmax(x) * W).sum())(X)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_of_vmap_and_vmap_of_grad(name, backend):
    op = _make(name)
    call = _call(op, backend)
    want = jax.vmap(jax.grad(lambda x: (_softmax(x) * W).sum()))(XS)
    vmap_of_grad = jax.vmap(jax.grad(lambda x: (call(x) * W).sum()))(XS)
    grad_of_vmap = jax.grad(lambda xs: (jax.vmap(call)(xs) * W).sum())(XS)
    np.testing.assert_allclose(vmap_of_grad, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad_of_vmap, want, rtol=1e-5, atol=1e-6)


def test_pallas_is_the_default_where_registered_first(name):
    op = xck.XLACustomKernel(name)
    op.def_pallas_kernel("cpu", _softmax_pallas, interpret=True)
    op.def_numba_kernel(lambda outs: _softmax_numba)
    assert op.defaults == {"cpu": "pallas"}
    np.testing.assert_allclose(_call(op, None)(X), _softmax(X), rtol=1e-5, atol=1e-6)


def _gpus():
    try:
        return jax.devices("gpu")
    except RuntimeError:
        return []


@pytest.mark.skipif(not _gpus(), reason="needs a GPU visible to JAX")
def test_compiled_on_a_gpu(name):
    op = _make(name)
    x = jax.device_put(X, _gpus()[0])
    call = _call(op, None)  # the gpu default: the compiled Pallas kernel
    np.testing.assert_allclose(jax.jit(call)(x), _softmax(X), rtol=1e-5, atol=1e-6)
    xs = jax.device_put(XS, _gpus()[0])
    np.testing.assert_allclose(jax.vmap(call)(xs), _softmax(XS), rtol=1e-5, atol=1e-6)
    got = jax.grad(lambda x: (call(x) * W).sum())(x)
    want = jax.grad(lambda x: (_softmax(x) * W).sum())(X)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- errors


def test_cpu_without_interpret_is_refused(name):
    op = xck.XLACustomKernel(name)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "`platform` of a Pallas kernel must be 'gpu' or 'tpu', got 'cpu'; Pallas runs on "
            "CPU only in interpret mode: def_pallas_kernel('cpu', kg, interpret=True) "
            "registers kg for tests and development and passes it interpret=True, which "
            "kg must pass on to pallas_call"
        ),
    ):
        op.def_pallas_kernel("cpu", _softmax_pallas)
    assert op.available_backends("cpu") == []


@pytest.mark.parametrize("value", [1, "yes", None])
def test_interpret_must_be_a_bool(name, value):
    op = xck.XLACustomKernel(name)
    with pytest.raises(
        TypeError, match=re.escape(f"`interpret` must be a bool, got {type(value)!r}")
    ):
        op.def_pallas_kernel("cpu", _softmax_pallas, interpret=value)


@pytest.mark.parametrize("platform", ["gpu", "tpu"])
def test_interpret_is_for_cpu_only(name, platform):
    op = xck.XLACustomKernel(name)
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"`interpret=True` is for platform 'cpu' (tests and development), got "
            f"{platform!r}; on {platform!r} the compiled kernel runs: register it with "
            f"def_pallas_kernel({platform!r}, kg)"
        ),
    ):
        op.def_pallas_kernel(platform, _softmax_pallas, interpret=True)
    assert op.available_backends(platform) == []


def test_interpret_needs_a_generator_taking_it(name):
    op = xck.XLACustomKernel(name)

    def kg(outs, **static):
        return _softmax_pallas(outs)

    with pytest.raises(
        TypeError,
        match=re.escape(
            "with interpret=True the kernel generator `kg` must take an `interpret` keyword "
            "and pass it to pallas_call, e.g. `def kg(outs, *, interpret=False): return "
            f"pl.pallas_call(body, out_shape=outs, interpret=interpret)`; got {kg!r}"
        ),
    ):
        op.def_pallas_kernel("cpu", kg, interpret=True)
    assert op.available_backends("cpu") == []


def test_interpret_is_not_a_static_keyword_of_the_call(name):
    op = _make(name)
    with pytest.raises(
        xck.BackendError,
        match=re.escape(
            f"backend 'pallas' of kernel {name!r} failed on platform 'cpu': TypeError: static "
            "keyword `interpret` of a Pallas kernel is set by its registration "
            "(def_pallas_kernel(..., interpret=...)), not by the call; remove it from the "
            "call. Other backends for cpu: 'numba'; switch with "
            f"xla_custom_kernel.get_kernel({name!r}).set_default('cpu', 'numba') "
            "or pass backend='numba' to the call"
        ),
    ):
        op(X, outs=jax.ShapeDtypeStruct(X.shape, X.dtype), backend="pallas", interpret=False)
