"""kernel-bench check: check_kernel from the command line, through main([...])."""

from __future__ import annotations

import re
import sys
import types

import jax
import numpy as np
import pytest
from kernel_bench import BenchmarkConfig
from kernel_bench._cli import main
from xla_custom_kernel import XLACustomKernel


def _op(name, *, off_by_one):
    op = XLACustomKernel(name)
    op.def_jax_kernel(lambda outs: lambda x: 2 * x)
    if off_by_one:
        op.def_kernel("off", "cpu", lambda outs: lambda x: (2 * x).at[1].add(1))
    op.def_call(lambda x: op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)))
    op.def_benchmark_data(
        lambda *, platform: [
            BenchmarkConfig(f"n={n}", (np.arange(n, dtype=np.float32),)) for n in (8, 4)
        ]
    )
    return op


TARGET = types.ModuleType("kernel_bench_check_cli_target")
TARGET.good = _op("kernel_bench_check_cli_good", off_by_one=False)
TARGET.bad = _op("kernel_bench_check_cli_bad", off_by_one=True)
TARGET.no_data = XLACustomKernel("kernel_bench_check_cli_no_data")
TARGET.not_a_kernel = 3


@pytest.fixture
def ops(monkeypatch):
    monkeypatch.setitem(sys.modules, TARGET.__name__, TARGET)
    return TARGET


def test_check_bundled_example(capsys):
    assert main(["check", "axpy", "--checks", "results", "vmap: batch axis 0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "check_kernel(kernel_bench.examples.axpy): 4 passed, 0 failed, 0 skipped\n"
    )
    assert "results: reference" in out and "vmap: batch axis 0" in out


def test_check_without_targets_checks_every_bundled_example(capsys):
    assert main(["check", "--checks", "results: eager vs jit"]) == 0
    out = capsys.readouterr().out
    names = re.findall(r"^check_kernel\(kernel_bench\.examples\.(\w+)\): 1 passed", out, re.M)
    assert names == ["axpy", "exp_trace", "lif_step", "csr_matvec", "csr_matmat"]


def test_a_users_op_may_take_an_examples_short_name(tmp_path, monkeypatch, capsys):
    # The bundled examples are namespaced (kernel_bench.examples.csr_matvec):
    # a library's own csr_matvec, imported after them, is no duplicate.
    import kernel_bench.examples

    assert kernel_bench.examples.csr_matvec.name == "kernel_bench.examples.csr_matvec"
    (tmp_path / "kernel_bench_user_ops.py").write_text(
        "import jax, numpy as np\n"
        "from kernel_bench import BenchmarkConfig\n"
        "from xla_custom_kernel import XLACustomKernel\n"
        "csr_matvec = XLACustomKernel('csr_matvec')\n"
        "csr_matvec.def_jax_kernel(lambda outs: lambda x: 2 * x)\n"
        "csr_matvec.def_call(lambda x: csr_matvec(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)))\n"
        "csr_matvec.def_benchmark_data(lambda *, platform: "
        "[BenchmarkConfig('n=4', (np.arange(4, dtype=np.float32),))])\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["check", "kernel_bench_user_ops:csr_matvec", "--checks", "results"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("check_kernel(csr_matvec): 2 passed, 0 failed, 1 skipped\n")


def test_check_module_attr_uses_the_smallest_benchmark_case(capsys, ops):
    target = "kernel_bench_check_cli_target:good"
    assert main(["check", target, "--checks", "results", "--skip", "results: reference"]) == 0
    out = capsys.readouterr().out
    assert "results: eager vs jit   passed" in out
    assert "results: reference      skipped  left out by --skip" in out


def test_check_fails_with_status_1(capsys, ops):
    assert main(["check", "kernel_bench_check_cli_target:bad", "--checks", "backends"]) == 1
    out = capsys.readouterr().out
    assert (
        "backends: backend 'off'  failed  output 0 at index (1,): default 2.0, backend 'off' 3.0"
        in out
    )


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nope", "operation 'nope' is neither a bundled example (axpy, "),
        (
            "kernel_bench_check_cli_target:missing",
            "module 'kernel_bench_check_cli_target' has no attribute 'missing'",
        ),
        (
            "kernel_bench_check_cli_target:not_a_kernel",
            "'kernel_bench_check_cli_target:not_a_kernel' must be an XLACustomKernel, got <class 'int'>",
        ),
        (
            "kernel_bench_check_cli_target:no_data",
            "kernel 'kernel_bench_check_cli_no_data' needs a call function (def_call) and "
            "benchmark data (def_benchmark_data) to be checked from the command line",
        ),
        ("no_such_module_here:x", "cannot import module 'no_such_module_here'"),
    ],
)
def test_check_bad_targets(capsys, ops, target, message):
    with pytest.raises(SystemExit) as info:
        main(["check", target])
    assert info.value.code == 2
    assert re.search(re.escape(message), capsys.readouterr().err)


def test_check_unknown_check_name(capsys):
    with pytest.raises(SystemExit):
        main(["check", "axpy", "--checks", "vmaps"])
    assert "`checks` names unknown checks ['vmaps']" in capsys.readouterr().err
