"""The autotuner, the suite's columns and backend "auto" time the same compiled
program: checked on the bundled examples' real kernels, by comparing the
optimized programs XLA compiles (not their times)."""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numba
import pytest
from kernel_bench import examples
from kernel_bench._timing import chained
from kernel_bench.autotune._measure import example_data
from kernel_bench.examples import _axpy, _csr
from xla_custom_kernel import CallSite

_METADATA = re.compile(r",? metadata=\{[^{}]*\}")
_NAME = re.compile(r"%[\w.\-]+")


def _program(run, *args):
    """The optimized HLO of a chain made by ``_timing.chained``, without what
    names it (source locations, the function's and the arguments' names)."""
    count = jnp.asarray(3, jnp.int32)
    text = jax.jit(run).lower(count, *args).compile().as_text()
    text = text[text.index("\n%") :]  # the computations, not the table of source files
    text = _METADATA.sub("", text)
    names: dict[str, str] = {}
    return _NAME.sub(lambda m: names.setdefault(m.group(), f"%v{len(names)}"), text)


def _case(op):
    examples.set_scale("quick")
    try:
        cfg = next(iter(op.benchmark_data(platform="cpu")))
    finally:
        examples.set_scale("default")
    return cfg, jax.device_put(cfg.args, jax.devices("cpu")[0])


@pytest.mark.parametrize("op", [examples.axpy, examples.lif_step], ids=lambda op: op.name)
@pytest.mark.parametrize("backend", ["numba", "jax"])
def test_the_autotuner_times_the_suites_program(op, backend):
    cfg, args = _case(op)
    suite = chained(functools.partial(op.call, backend=backend, **cfg.kernel_kwargs))
    outs = jax.eval_shape(functools.partial(op.call, backend=backend, **cfg.kernel_kwargs), *args)
    site = CallSite.from_call(op, *args, outs=outs, **cfg.kernel_kwargs)
    autotuner = chained(site.runner(backend))
    assert _program(autotuner, *args) == _program(suite, *args)
    # And on the autotuner's own data, of the same shapes: the same program.
    data = jax.device_put(example_data(site), jax.devices("cpu")[0])
    assert [x.shape for x in data] == [x.shape for x in args]
    assert _program(autotuner, *data) == _program(suite, *args)


@pytest.mark.parametrize("picked", ["numba", "jax"])
def test_auto_compiles_to_the_program_of_the_backend_it_picked(picked, autotune_costs):
    autotune_costs.update({b: (10.0 if b == picked else 1000.0) for b in ("numba", "jax", "warp")})
    _, args = _case(examples.axpy)
    auto = chained(functools.partial(examples.axpy.call, backend="auto"))
    fixed = chained(functools.partial(examples.axpy.call, backend=picked))
    assert _program(auto, *args) == _program(fixed, *args)


def test_the_suites_numba_kernels_are_their_parallel_forms():
    # A user with several cores gets the prange form (threads above
    # numba_cpu_ffi.parallel_min_elements(), the serial twin below it).
    for kernel in (_axpy._axpy_numba, _csr._csr_matvec_numba, _csr._csr_matmat_numba):
        assert isinstance(kernel, numba.core.registry.CPUDispatcher)
        assert kernel.targetoptions.get("parallel") is True, kernel


def test_two_backends_compile_to_different_programs():
    # The comparison above can fail: numba's program is not jax's.
    _, args = _case(examples.axpy)
    numba_run, jax_run = (
        chained(functools.partial(examples.axpy.call, backend=b)) for b in ("numba", "jax")
    )
    assert _program(numba_run, *args) != _program(jax_run, *args)


_TARGET = re.compile(r'custom_call_target="([^"]+)"')
_OP = re.compile(r"= \S+ ([\w\-]+)\(")


@pytest.mark.parametrize("op", [examples.csr_matvec, examples.csr_matmat], ids=lambda op: op.name)
def test_auto_calls_the_same_kernel_as_the_backend_it_picked_and_adds_no_op(op, autotune_costs):
    # The suite's "auto" column and its "numba" column run one compiled program:
    # the same custom call (the numba handler) and not one operation more.
    autotune_costs.update({"numba": 10.0})
    cfg, args = _case(op)
    auto, fixed = (
        _program(chained(functools.partial(op.call, backend=b, **cfg.kernel_kwargs)), *args)
        for b in ("auto", "numba")
    )
    assert _TARGET.findall(auto) == _TARGET.findall(fixed) != []
    assert sorted(_OP.findall(auto)) == sorted(_OP.findall(fixed)) != []
    assert auto == fixed
