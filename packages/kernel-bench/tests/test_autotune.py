"""Backend "auto": the choice, the checks before a backend is trusted, the cache."""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import itertools
import json
import math
import os
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xla_custom_kernel as xck
from kernel_bench import autotune, benchmark_kernel
from kernel_bench._cli import main
from kernel_bench.autotune import _cache as _autotune_cache
from kernel_bench.autotune import _decide as _autotune_decide
from kernel_bench.autotune import _distributed as _autotune_distributed

_names = itertools.count()


@pytest.fixture(autouse=True)
def _known_costs(autotune_costs):
    # Timing is deterministic (conftest's autotune_costs): a backend costs what
    # the test says, whatever the machine does meanwhile.
    autotune_costs.update(slow=1000.0, reference=1000.0, fast=10.0, off=10.0)


def _doubling():
    """A backend doubling its input (a fresh function: each backend its own)."""
    return lambda x: 2 * x


def _op(backends, platform="cpu"):
    """An operation with the given backends (name -> callable), registered in order."""
    op = xck.XLACustomKernel(f"autotune_test_{next(_names)}")
    for name, fn in backends.items():
        op.def_kernel(name, platform, lambda outs, fn=fn: fn, batching="vmap")
    return op


def _out(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def test_picks_the_fastest_backend_not_the_first_registered(capsys, autotune_costs):
    autotune_costs.update(slow=2000.0, medium=200.0, fast=20.0)
    op = _op({"slow": _doubling(), "medium": _doubling(), "fast": lambda x: 2 * x})
    x = jnp.arange(16, dtype=jnp.float32)
    with autotune.recording() as found:
        y = jax.jit(functools.partial(op, outs=_out(x), backend="auto"))(x)
    np.testing.assert_array_equal(y, 2 * np.arange(16))
    (decision,) = found
    assert decision.backend == "fast" and decision.source == "measured"
    times = {c.backend: c.us_per_call for c in decision.candidates}
    assert times == {"slow": 2000.0, "medium": 200.0, "fast": 20.0}
    assert (decision.margin, decision.noise, decision.busy) == (10.0, 0.0, False)
    assert [c.backend for c in decision.candidates] == ["slow", "medium", "fast"]

    again = op.explain(x, outs=_out(x))
    assert again == decision  # from memory, as it was
    text = capsys.readouterr().out
    assert f"{op.name} on cpu: float32[16]\n" in text
    assert (
        "choice: fast (measured in this process; margin 10.00x, noise 0.0%, machine quiet)" in text
    )
    assert autotune.stats()["measured"] == 1 and autotune.stats()["memory"] == 1


def test_a_failing_backend_is_never_chosen():
    def broken(x):
        raise RuntimeError("this backend cannot run here")

    op = _op({"slow": _doubling(), "broken": broken})
    x = jnp.ones(4, jnp.float32)
    with pytest.warns(autotune.AutotuneWarning, match="leaves out backend 'broken': failed: "):
        decision = autotune.explain(op, x, outs=_out(x))
    assert decision.backend == "slow"
    broken_c = decision.candidates[1]
    assert broken_c.status == "failed" and broken_c.us_per_call is None
    assert "this backend cannot run here" in broken_c.detail


@pytest.mark.parametrize(
    ("dtype", "error", "agrees"),
    [
        (np.float32, 1e-6, True),
        (np.float32, 1e-2, False),
        (np.float16, 1e-4, True),
        (np.float16, 1e-1, False),
        (np.int32, 1, False),
    ],
)
def test_a_backend_whose_results_disagree_is_never_chosen(dtype, error, agrees):
    def off(x):
        return 2 * x + jnp.asarray(error, x.dtype) * (1 + jnp.abs(x)).astype(x.dtype)

    op = _op({"reference": _doubling(), "off": off})
    x = jnp.arange(8, dtype=dtype)
    if agrees:
        decision = autotune.explain(op, x, outs=_out(x))
        assert decision.backend == "off"
        return
    with pytest.warns(autotune.AutotuneWarning, match="leaves out backend 'off': disagrees: "):
        decision = autotune.explain(op, x, outs=_out(x))
    assert decision.backend == "reference"
    assert decision.candidates[1].status == "disagrees"
    assert decision.candidates[1].detail.endswith("from 'reference'")


def test_set_default_auto_keeps_the_fixed_default_as_fallback():
    op = _op({"slow": _doubling(), "fast": lambda x: 2 * x})
    op.set_default("cpu", "auto")
    assert op.get_default("cpu") == "auto"
    assert op.fixed_default("cpu") == "slow"
    assert op.defaults == {"cpu": "auto"}
    x = jnp.ones(4, jnp.float32)
    with autotune.recording() as found:
        np.testing.assert_array_equal(op(x, outs=_out(x)), 2 * np.ones(4))
    assert [d.backend for d in found] == ["fast"]
    op.set_default("cpu", "slow")
    assert op.get_default("cpu") == "slow"


def test_set_backend_auto_applies_to_every_kernel():
    op = _op({"slow": _doubling(), "fast": lambda x: 2 * x})
    x = jnp.ones(4, jnp.float32)
    xck.set_backend("auto")
    try:
        with autotune.recording() as found:
            op(x, outs=_out(x))
    finally:
        xck.set_backend(None)
    assert [d.backend for d in found] == ["fast"]


def test_nested_recordings_each_collect_their_own_block():
    op = _op({"slow": _doubling(), "fast": lambda x: 2 * x})
    x = jnp.ones(4, jnp.float32)
    with autotune.recording() as outer:
        with autotune.recording() as inner:
            op(x, outs=_out(x), backend="auto")
        op(jnp.ones(5, jnp.float32), outs=_out(jnp.ones(5, jnp.float32)), backend="auto")
    assert [d.signature for d in inner] == ["float32[4]"]
    assert [d.signature for d in outer] == ["float32[4]", "float32[5]"]


def test_decided_once_per_signature_and_the_batched_shape_is_the_key():
    op = _op({"slow": _doubling(), "fast": lambda x: 2 * x})
    f = jax.jit(lambda x: op(x, outs=_out(x), backend="auto"))
    x = jnp.ones(4, jnp.float32)
    for _ in range(3):
        f(x)
    assert autotune.stats()["measured"] == 1
    f(jnp.ones(5, jnp.float32))
    assert autotune.stats()["measured"] == 2
    with autotune.recording() as found:
        y = jax.vmap(f)(jnp.ones((3, 4), jnp.float32))
    np.testing.assert_array_equal(y, 2 * np.ones((3, 4)))
    assert [d.signature for d in found] == ["float32[3, 4]; vmap 3 over input 0"]
    assert autotune.stats()["measured"] == 3


def test_fallback_where_the_platform_has_no_device():
    op = _op({"a": lambda x: 2 * x, "b": lambda x: x + x}, platform="gpu")
    decision = autotune.explain(
        op, jax.ShapeDtypeStruct((4,), jnp.float32), outs=_out(jnp.ones(4)), platform="gpu"
    )
    assert (decision.backend, decision.source) == ("a", "fallback")
    assert decision.reason == "no gpu device in this process to measure on"
    assert autotune.stats()["fallback"] == 1


def test_a_single_backend_is_not_measured():
    op = _op({"only": lambda x: 2 * x})
    decision = autotune.explain(op, jnp.ones(4), outs=_out(jnp.ones(4)))
    assert (decision.backend, decision.source, decision.candidates) == ("only", "only backend", ())
    assert autotune.stats()["measured"] == 0


def test_backends_whose_bridge_is_absent_are_passed_over_and_explained(capsys):
    absent = f"absent_{next(_names)}"
    xck.register_backend_adapter(
        xck.BackendAdapter(absent, ("cpu",), "vmap", extra="absent", module=f"{absent}_ffi")
    )
    reason = (
        f"{absent.replace('_', '-')}-ffi is not installed; install it with `pip install "
        '"xla-custom-kernel[absent]"` (from wheels built from the repository: '
        '`pip install --find-links DIR "xla-custom-kernel[absent]"`; in a uv project: `uv add "xla-custom-kernel[absent]"`)'
    )
    op = _op({"slow": _doubling(), "fast": _doubling()})
    getattr(op, f"def_{absent}_kernel")(lambda outs: pytest.fail("an absent backend ran"))
    x = jnp.ones(4)
    decision = autotune.explain(op, x, outs=_out(x))
    assert [c.backend for c in decision.candidates] == ["slow", "fast"]
    assert decision.backend == "fast" and decision.unavailable == {absent: reason}
    assert f"\nnot a candidate: {absent} ({reason})\nchoice: fast" in decision.describe()
    assert "unavailable" not in decision.to_dict()
    np.testing.assert_array_equal(op(x, outs=_out(x), backend="auto"), 2 * x)

    single = _op({"only": _doubling()})
    getattr(single, f"def_{absent}_kernel")(lambda outs: pytest.fail("an absent backend ran"))
    decision = autotune.explain(single, x, outs=_out(x))
    assert (decision.backend, decision.source) == ("only", "only backend")
    assert decision.describe().endswith(
        f"\nnot a candidate: {absent} ({reason})\nchoice: only (the only backend available)"
    )
    nothing = xck.XLACustomKernel(f"autotune_test_{next(_names)}")
    getattr(nothing, f"def_{absent}_kernel")(lambda outs: pytest.fail("an absent backend ran"))
    with pytest.raises(ValueError) as info:
        autotune.explain(nothing, x, outs=_out(x))
    assert str(info.value) == (
        f"kernel {nothing.name!r} has no backend that can run for platform 'cpu'; {absent}: {reason}"
    )
    capsys.readouterr()


def test_autotune_data_makes_the_inputs_and_is_checked():
    def gather(x, idx):
        return x[idx]

    op = _op({"slow": lambda x, i: _doubling()(x[i]) / 2, "fast": gather})
    seen = []

    @op.def_autotune_data
    def data(x, idx, *, outs):
        seen.append((x, idx, outs))
        return np.ones(x.shape, x.dtype), np.arange(idx.shape[0], dtype=idx.dtype) % x.shape[0]

    x, idx = jnp.ones(10, jnp.float32), jnp.zeros(6, jnp.int32)
    decision = autotune.explain(op, x, idx, outs=jax.ShapeDtypeStruct((6,), jnp.float32))
    assert decision.backend == "fast"
    assert seen == [
        (
            jax.ShapeDtypeStruct((10,), jnp.float32),
            jax.ShapeDtypeStruct((6,), jnp.int32),
            jax.ShapeDtypeStruct((6,), jnp.float32),
        )
    ]
    op.def_autotune_data(lambda x, idx, *, outs: (np.ones(x.shape, np.float64), idx))
    with pytest.raises(ValueError) as info:
        autotune.explain(
            op, x, jnp.zeros(7, jnp.int32), outs=jax.ShapeDtypeStruct((7,), jnp.float32)
        )
    assert str(info.value) == (
        f"the autotune data function of kernel '{op.name}' made float64[10] for input 0, "
        "float32[10] was expected; it must return one array per input with the shapes and "
        "dtypes it is given"
    )


def test_version_change_invalidates_the_cache(monkeypatch, tmp_path):
    op = _op({"slow": _doubling(), "fast": lambda x: 2 * x})
    x = jnp.ones(4, jnp.float32)
    autotune.explain(op, x, outs=_out(x))
    monkeypatch.setattr(_autotune_decide, "_memory", {})
    assert autotune.explain(op, x, outs=_out(x)).source == "disk"
    assert autotune.stats() | {} == {**autotune.stats(), "measured": 1, "disk": 1}

    versions = _autotune_cache._versions()
    monkeypatch.setattr(_autotune_cache, "_versions", lambda: {**versions, "jax": "0.0.1"})
    monkeypatch.setattr(_autotune_decide, "_memory", {})
    assert autotune.explain(op, x, outs=_out(x)).source == "measured"
    assert autotune.stats()["measured"] == 2
    files = sorted(p.name for p in autotune.cache_dir().glob("*.json"))
    assert len(files) == 2 and all(f.startswith("cpu-") for f in files)


def test_clear_forgets_on_disk_and_in_memory():
    first = _op({"slow": _doubling(), "fast": lambda x: 2 * x})
    second = _op({"slow": _doubling(), "fast": lambda x: 2 * x})
    x = jnp.ones(4, jnp.float32)
    for op in (first, second):
        autotune.explain(op, x, outs=_out(x))
    assert sorted(d.op for d in autotune.cached_decisions()) == sorted([first.name, second.name])
    assert autotune.clear(first.name) == 1
    assert [d.op for d in autotune.cached_decisions()] == [second.name]
    (path,) = autotune.cache_dir().glob("*.json")
    kept = json.loads(path.read_text())
    assert kept["fingerprint"]["platform"] == "cpu" and len(kept["decisions"]) == 1
    assert autotune.explain(first, x, outs=_out(x)).source == "measured"
    assert autotune.clear() == 2
    assert autotune.cached_decisions() == []


def test_budget_is_checked():
    with pytest.raises(ValueError, match=r"^`seconds` must be a positive number, got 0$"):
        autotune.set_budget(0)
    autotune.set_budget(0.5)
    assert autotune.get_budget() == 0.5


def test_explain_rejects_what_is_not_an_array():
    op = _op({"a": lambda x: 2 * x, "b": lambda x: x + x})
    with pytest.raises(
        TypeError,
        match=r"^input 0 of explain must be an array or a jax.ShapeDtypeStruct, got <class 'list'>$",
    ):
        autotune.explain(op, [1.0], outs=_out(jnp.ones(1)))


_SCRIPT = textwrap.dedent(
    """
    import json
    import jax, jax.numpy as jnp
    import xla_custom_kernel as xck
    from kernel_bench import autotune
    from kernel_bench.autotune import _measure as _autotune_measure

    # A fake clock: "slow" takes 1 ms a call, "fast" 10 us, every round; and
    # a quiet machine, whatever else runs beside the test.
    _autotune_measure.interleaved = lambda runs, counts, data, *, rounds, **kw: {
        b: [1000.0 if b == "slow" else 10.0] * rounds for b in runs
    }
    _autotune_measure.OtherLoad = type("Quiet", (), {"share": lambda self: 0.0})
    op = xck.XLACustomKernel("autotune_across_processes")
    op.def_kernel("slow", "cpu", lambda outs: lambda x: x + x)
    op.def_kernel("fast", "cpu", lambda outs: lambda x: 2 * x)
    autotune.set_budget(0.05)
    x = jnp.ones(8, jnp.float32)
    with autotune.recording() as found:
        jax.jit(lambda x: op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), backend="auto"))(x)
    print(json.dumps({"choice": found[0].backend, "stats": autotune.stats()}))
    """
)


def test_a_second_process_measures_nothing(tmp_path):
    script = tmp_path / "decide.py"
    script.write_text(_SCRIPT)
    env = {**os.environ, autotune.CACHE_ENV: str(tmp_path / "cache")}
    runs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert [r["choice"] for r in runs] == ["fast", "fast"]
    assert (runs[0]["stats"]["measured"], runs[0]["stats"]["disk"]) == (1, 0)
    assert (runs[1]["stats"]["measured"], runs[1]["stats"]["disk"]) == (0, 1)


def test_benchmark_kernel_runs_auto_beside_the_backends():
    op = _op({"slow": _doubling(), "fast": lambda x: 2 * x})
    from kernel_bench import BenchmarkConfig

    op.def_call(lambda x: op(x, outs=_out(x)))
    op.def_benchmark_data(lambda *, platform: [BenchmarkConfig("n=8", (np.ones(8, np.float32),))])
    result = benchmark_kernel(op, n_warmup=1, n_runs=2, autotune=True)
    assert [r.backend for r in result.records] == ["slow", "fast", "auto"]
    assert all(r.success for r in result.records)


def test_cli_autotune_run_show_and_clear(capsys):
    assert main(["autotune", "run", "axpy", "--quick", "--budget", "0.05"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "# kernel_bench.examples.axpy/n=1e+04\n"
        "kernel_bench.examples.axpy on cpu: float32[10000], float32[10000], float32[1]\n"
    )
    assert "choice: " in out and "(measured in this process; margin " in out

    assert main(["autotune", "show"]) == 0
    out = capsys.readouterr().out
    assert "kernel_bench.examples.axpy on cpu: float32[10000], float32[10000], float32[1]" in out
    assert "(read from the autotune cache (" in out
    # The fake clock times every backend alike: a tie, within the noise.
    assert "; margin 1.00x, noise 0.0%, machine quiet; measured again in the next process)" in out

    # A name the cache holds no decision of is said on stderr, with those it holds.
    assert main(["autotune", "show", "axpi"]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"no autotune decisions in {autotune.cache_dir()}\n"
    assert captured.err == (
        "kernel-bench: no autotune decisions of axpi (operations with decisions: axpy)\n"
    )
    assert main(["autotune", "clear", "axpy"]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"removed 1 decision(s) of axpy from {autotune.cache_dir()}\n"
    assert captured.err == ""
    assert main(["autotune", "show"]) == 0
    assert capsys.readouterr().out == f"no autotune decisions in {autotune.cache_dir()}\n"
    assert main(["autotune", "clear", "axpy"]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"removed 0 decision(s) of axpy from {autotune.cache_dir()}\n"
    assert captured.err == (
        "kernel-bench: no autotune decisions of axpy (operations with decisions: none)\n"
    )


def test_cli_autotune_run_names_unknown_operations(capsys):
    with pytest.raises(SystemExit):
        main(["autotune", "run", "no_such_op"])
    err = capsys.readouterr().err
    assert "no operation named 'no_such_op' in the bundled suite (axpy, exp_trace, lif_step" in err


def test_under_scan_grad_and_leak_checking():
    from kernel_bench.examples import csr_matvec, random_csr

    data, indices, indptr = random_csr(50, 40, 0.2)
    v = jnp.linspace(-1.0, 1.0, 40, dtype=jnp.float32)

    def loss(data, v, backend):
        def step(carry, _):
            y = csr_matvec.call(data, indices, indptr, carry, shape=(50, 40), backend=backend)
            return carry + 0.01 * y[:40], None

        out, _ = jax.lax.scan(step, v, None, length=3)
        return out.sum()

    with jax.checking_leaks(), autotune.recording() as found:
        got = jax.jit(jax.grad(loss, argnums=(0, 1)), static_argnums=2)(data, v, "auto")
    want = jax.jit(jax.grad(loss, argnums=(0, 1)), static_argnums=2)(data, v, "jax")
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    # The forward and transposed products were decided (once each per signature).
    assert {d.op for d in found} == {"kernel_bench.examples.csr_matvec"}
    assert len({d.key for d in found}) == autotune.stats()["measured"] >= 2


def test_under_shard_map_the_shard_shape_is_the_key():
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    if len(jax.devices()) < 4:
        pytest.skip("needs 4 devices (the workspace conftest forces 4 CPU devices)")
    op = _op({"slow": _doubling(), "fast": lambda x: 2 * x})
    mesh = Mesh(np.array(jax.devices()[:4]), ("d",))
    f = jax.jit(
        jax.shard_map(
            lambda x: op(x, outs=_out(x), backend="auto"),
            mesh=mesh,
            in_specs=P("d"),
            out_specs=P("d"),
        )
    )
    x = jnp.arange(32, dtype=jnp.float32)
    with autotune.recording() as found:
        np.testing.assert_array_equal(f(x), 2 * np.arange(32))
    assert [(d.signature, d.backend) for d in found] == [("float32[8]", "fast")]


def test_a_static_value_written_with_an_address_stays_in_this_process():
    op = xck.XLACustomKernel(f"autotune_test_{next(_names)}")
    op.def_kernel("slow", "cpu", lambda outs, fn: _doubling())
    op.def_kernel("fast", "cpu", lambda outs, fn: lambda x: 2 * x)
    marker = object()  # hashable, its repr holds an address
    x = jnp.ones(4, jnp.float32)
    decision = autotune.explain(op, x, outs=_out(x), fn=marker)
    assert decision.backend == "fast" and decision.source == "measured"
    assert autotune.cached_decisions() == []  # not written: no other process could find it


def test_processes_cannot_agree_on_a_static_value_written_with_an_address(monkeypatch):
    op = xck.XLACustomKernel(f"autotune_test_{next(_names)}")
    op.def_kernel("slow", "cpu", lambda outs, fn: _doubling())
    op.def_kernel("fast", "cpu", lambda outs, fn: lambda x: 2 * x)
    monkeypatch.setattr(_autotune_distributed, "client", lambda: object())  # as if 2 processes
    x = jnp.ones(4, jnp.float32)
    with pytest.raises(RuntimeError) as info:
        autotune.explain(op, x, outs=_out(x), fn=object())
    assert str(info.value) == (
        f"backend 'auto' of {op.name} cannot be agreed between processes: static keyword 'fn' "
        "is written with a memory address, different in every process, so the processes would "
        "not find each other's decision; pass a value whose repr is the same everywhere, or "
        "pick a backend by name"
    )


def test_explain_and_def_autotune_data_name_what_they_accept(capsys):
    op = _op({"a": lambda x: 2 * x, "b": lambda x: x + x})
    x = jnp.ones(2, jnp.float32)
    with pytest.raises(ValueError) as info:
        autotune.explain(op, x, outs=_out(x), platform="xpu")
    assert str(info.value) == "`platform` must be None, 'cpu', 'gpu' or 'tpu', got 'xpu'"
    with pytest.raises(ValueError) as info:
        autotune.explain(op, x, outs=_out(x), platform="tpu")
    assert str(info.value) == f"kernel {op.name!r} has no backend for platform 'tpu'"
    with pytest.raises(TypeError) as info:
        op.def_autotune_data("not a function")
    assert str(info.value) == "`fn` must be callable, got <class 'str'>"
    with pytest.raises(SystemExit):
        main(["autotune", "run", "axpy", "--budget", "0"])
    assert "--budget must be a positive number of seconds, got 0.0" in capsys.readouterr().err


# ------------------------------------------------------------------ the statistic, margin, noise


def test_the_median_of_rounds_ranks_not_the_least(autotune_costs):
    # "lucky" has one fast round and is slow in every other: the median says so.
    autotune_costs.update(lucky=[5.0, 500.0, 500.0, 500.0, 500.0], steady=100.0)
    op = _op({"lucky": _doubling(), "steady": _doubling()})
    decision = autotune.explain(op, jnp.ones(4), outs=_out(jnp.ones(4)))
    assert decision.backend == "steady"
    assert {c.backend: c.us_per_call for c in decision.candidates} == {
        "lucky": 500.0,
        "steady": 100.0,
    }
    assert decision.margin == 5.0


def test_noise_is_the_winners_interquartile_range_over_its_median(autotune_costs):
    # Rounds of 10, 10, 10, 20, 20 over and over: quartiles 10 and 20, median 10.
    autotune_costs.update(fast=[10.0, 10.0, 10.0, 20.0, 20.0])
    op = _op({"slow": _doubling(), "fast": _doubling()})
    decision = autotune.explain(op, jnp.ones(4), outs=_out(jnp.ones(4)))
    assert decision.backend == "fast" and decision.margin == 100.0
    # Two calls of the fake clock, each of the most rounds: twice that of "fast".
    from kernel_bench.autotune import _measure

    assert len(decision.candidates[1].times_us) == 2 * _measure.MAX_ROUNDS
    assert decision.noise == 1.0 and decision.busy
    assert autotune.BUSY_NOISE < decision.noise


@pytest.mark.parametrize(
    ("load", "busy", "words"),
    [
        # Measured quiet: the rounds' spread alone does not make the machine
        # busy; the margin over that spread settles the decision.
        (0.0, False, "noise 100.0%, machine quiet (other processes 0% of the CPUs)"),
        (0.2, False, "noise 100.0%, machine quiet (other processes 20% of the CPUs)"),
        # Measured loaded: busy whatever the spread, measured again next time.
        (0.5, True, "machine busy (other processes 50% of the CPUs); measured again"),
        # Unknown (no /proc/stat): the spread above BUSY_NOISE stands in.
        (None, True, "noise 100.0%, machine busy; measured again in the next process"),
    ],
)
def test_the_load_of_other_processes_says_whether_the_machine_was_busy(
    autotune_costs, load, busy, words
):
    autotune_costs.update(fast=[10.0, 10.0, 10.0, 20.0, 20.0])
    autotune_costs.load = load
    op = _op({"slow": _doubling(), "fast": _doubling()})
    decision = autotune.explain(op, jnp.ones(4), outs=_out(jnp.ones(4)))
    assert (decision.noise, decision.load, decision.busy) == (1.0, load, busy)
    assert decision.settled is not busy  # margin 100x, beyond the noise
    assert words in decision.describe()
    (stored,) = autotune.cached_decisions()
    assert (stored.load, stored.busy) == (load, busy)


def test_a_steady_load_makes_a_quiet_looking_measurement_busy(autotune_costs):
    # Rounds that agree (no spread) on a machine another program keeps busy:
    # every round slowed alike, which only the load shows.
    autotune_costs.update(slow=12.0, fast=10.0)
    autotune_costs.load = autotune.BUSY_LOAD + 0.01
    op = _op({"slow": _doubling(), "fast": _doubling()})
    decision = autotune.explain(op, jnp.ones(4), outs=_out(jnp.ones(4)))
    assert decision.noise == 0.0 and decision.busy and not decision.settled


def test_margin_of_a_single_timed_candidate_is_infinite():
    def broken(x):
        raise RuntimeError("no")

    op = _op({"fast": _doubling(), "broken": broken})
    with pytest.warns(autotune.AutotuneWarning):
        decision = autotune.explain(op, jnp.ones(4), outs=_out(jnp.ones(4)))
    assert (decision.backend, decision.margin, decision.noise) == ("fast", math.inf, 0.0)
    assert decision.settled
    assert "only candidate timed, noise 0.0%, machine quiet" in decision.describe()


def test_no_margin_where_nothing_was_measured():
    op = _op({"a": _doubling(), "b": _doubling()}, platform="gpu")
    decision = autotune.explain(
        op, jax.ShapeDtypeStruct((4,), jnp.float32), outs=_out(jnp.ones(4)), platform="gpu"
    )
    assert (decision.source, decision.margin, decision.noise, decision.busy) == (
        "fallback",
        None,
        None,
        False,
    )
    assert decision.settled


@pytest.mark.parametrize(
    ("costs", "settled"),
    [
        ({"slow": 1000.0, "fast": 10.0}, True),  # margin 100x, no noise
        ({"slow": 10.6, "fast": 10.0}, True),  # margin 1.06x, no noise: settled
        ({"slow": 10.4, "fast": 10.0}, False),  # margin 1.04x, no noise: a tie (TIE, 5 %)
        ({"slow": 10.5, "fast": [9.0, 10.0, 10.0, 11.0, 11.0]}, False),  # 1.05x within 10 %
        ({"slow": 1000.0, "fast": [5.0, 10.0, 10.0, 20.0, 20.0]}, False),  # busy
    ],
)
def test_a_decision_not_settled_is_measured_again_once_per_later_process(
    monkeypatch, autotune_costs, costs, settled
):
    autotune_costs.update(costs)
    op = _op({"slow": _doubling(), "fast": _doubling()})
    x = jnp.ones(4, jnp.float32)
    first = autotune.explain(op, x, outs=_out(x))
    assert first.settled is settled
    monkeypatch.setattr(_autotune_decide, "_memory", {})  # as if a later process
    monkeypatch.setattr(autotune_costs, "rounds", [])
    again = autotune.explain(op, x, outs=_out(x))
    assert again.source == ("disk" if settled else "measured")
    assert autotune.stats()["remeasured"] == (0 if settled else 1)
    assert bool(autotune_costs.rounds) is not settled
    # Once per process: the decision of this process answers from now on.
    assert autotune.explain(op, x, outs=_out(x)) == again
    assert autotune.stats()["memory"] == 1
    (stored,) = autotune.cached_decisions()
    assert stored.margin == again.margin and stored.noise == again.noise


def test_margin_noise_busy_and_load_are_kept_on_disk_and_checked():
    decision = autotune.Decision(
        "op", "cpu", "s", "a" * 32, "b", margin=math.inf, noise=0.25, busy=True, load=0.5
    )
    record = decision.to_dict()
    assert (record["margin"], record["noise"], record["busy"], record["load"]) == (
        "inf",
        0.25,
        True,
        0.5,
    )
    assert autotune.Decision.from_dict(json.loads(json.dumps(record))) == decision
    old = {k: v for k, v in record.items() if k not in ("margin", "noise", "busy", "load")}
    assert autotune.Decision.from_dict(old) == dataclasses.replace(
        decision, margin=None, noise=None, busy=False, load=None
    )
    for field, value, message in [
        ("margin", 0.5, 'the margin must be a number >= 1, "inf" or null, got 0.5'),
        ("margin", "big", "the margin must be a number, got 'big'"),
        ("noise", -1.0, "the noise must be a finite number >= 0, got -1.0"),
        ("busy", 1, "busy must be a boolean, got 1"),
        ("load", 1.5, "the load must be a number from 0 to 1 or null, got 1.5"),
        ("load", "low", "the load must be a number, got 'low'"),
        ("load", math.nan, "the load must be a finite number >= 0, got nan"),
    ]:
        with pytest.raises(autotune.InvalidDecision, match=f"^{re.escape(message)}$"):
            autotune.Decision.from_dict({**record, field: value})


def test_the_old_name_of_invalid_decision_warns_and_still_works():
    message = (
        "kernel_bench.autotune.InvalidRecord is deprecated: use "
        "kernel_bench.autotune.InvalidDecision"
    )
    with pytest.warns(DeprecationWarning, match=f"^{re.escape(message)}$"):
        old = autotune.InvalidRecord
    assert old is autotune.InvalidDecision
    with pytest.raises(AttributeError, match=re.escape("has no attribute 'Invalid'")):
        autotune.Invalid  # noqa: B018


# ------------------------------------------------------------------ the chooser, the fingerprint


def test_kernel_bench_is_the_registered_chooser_and_is_handed_a_call_site(monkeypatch):
    assert xck.registered_chooser() is autotune.CHOOSER
    assert isinstance(autotune.CHOOSER, xck.Chooser)
    seen = []
    choose = autotune.CHOOSER.choose

    def spy(site):
        seen.append(site)
        return choose(site)

    monkeypatch.setattr(autotune.CHOOSER, "choose", spy)
    op = _op({"slow": _doubling(), "fast": _doubling()})
    x = jnp.ones((3, 4), jnp.float32)
    y = jax.vmap(lambda x: op(x, outs=_out(x), backend="auto"))(x)
    np.testing.assert_array_equal(y, 2 * np.ones((3, 4)))
    (site,) = seen
    assert isinstance(site, xck.CallSite)
    assert (site.op, site.platform, site.backends, site.batch) == (
        op.name,
        "cpu",
        ("slow", "fast"),
        ((3, (True,)),),
    )
    assert site.describe() == "float32[3, 4]; vmap 3 over input 0"


def test_the_fingerprint_lists_every_installed_package_of_the_project(monkeypatch):

    versions = autotune.fingerprint("cpu")["versions"]
    project = (
        "ffi-core",
        "numba-cpu-ffi",
        "numba-cuda-ffi",
        "warp-ffi",
        "triton-ffi",
        "cuda-source-ffi",
        "xla-custom-kernel",
        "kernel-bench",
    )
    installed = set()
    for name in project:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        installed.add(name)
    # kernel-bench's own dependencies are always there; the bridges where installed.
    assert {"ffi-core", "xla-custom-kernel", "kernel-bench"} <= installed
    for name in installed:
        assert versions[name] is not None, name

    class Dist:
        def __init__(self, name, requires):
            self.metadata = {"Name": name}
            self.requires = requires

    fake = [
        Dist("ffi_core", None),
        Dist("Some.Bridge", ["ffi-core[native]>=0.1,<0.2", "numpy"]),
        Dist("unrelated", ["numpy>=2"]),
    ]
    monkeypatch.setattr(_autotune_cache.importlib.metadata, "distributions", lambda: fake)
    assert _autotune_cache._project_packages() == ["ffi-core", "some-bridge"]


def test_cli_autotune_run_offers_only_its_own_options(capsys):
    with pytest.raises(SystemExit) as info:
        main(["autotune", "run", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for option in ("--quick", "--full", "--platform", "--budget"):
        assert option in text
    for option in ("--autotune", "--no-autotune", "--output", "--n-runs", "--progress"):
        assert option not in text


@pytest.mark.parametrize("machine_measures_load", [True, False])
def test_a_stored_decision_without_the_load_is_measured_again_where_load_is_measured(
    monkeypatch, autotune_costs, machine_measures_load
):
    # A settled decision written before the load was recorded: on a machine
    # that measures the load, whether it was busy then is unknown, so it is
    # measured once more (and stored with its load); where the load cannot
    # be measured, it is used as it is.
    autotune_costs.update(slow=1000.0, fast=10.0)
    op = _op({"slow": _doubling(), "fast": _doubling()})
    x = jnp.ones(4, jnp.float32)
    first = autotune.explain(op, x, outs=_out(x))
    assert first.settled and first.load is None
    monkeypatch.setattr(_autotune_decide, "_memory", {})  # as if a later process
    autotune_costs.load = 0.0 if machine_measures_load else None
    again = autotune.explain(op, x, outs=_out(x))
    assert again.source == ("measured" if machine_measures_load else "disk")
    assert autotune.stats()["remeasured"] == int(machine_measures_load)
    (stored,) = autotune.cached_decisions()
    assert stored.load == autotune_costs.load
