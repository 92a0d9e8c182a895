"""Every bundled example operation of kernel-bench passes check_kernel with its
defaults (no row left out) on its small sample inputs: results, backends,
vmap, autodiff, compilation, export in a fresh process, sharding over the CPU
devices, aliases, threads and bad inputs."""

from __future__ import annotations

import pytest
from kernel_bench._cli_common import short_name
from kernel_bench.examples import example_kernels, lif_step
from kernel_bench.examples._samples import SAMPLES
from xla_custom_kernel.testing import check_kernel


def test_every_example_has_a_sample():
    assert sorted(SAMPLES) == sorted(short_name(op.name) for op in example_kernels())


@pytest.mark.parametrize("op", example_kernels(), ids=lambda op: op.name)
def test_example_passes_check_kernel(op):
    sample = SAMPLES[short_name(op.name)]
    report = check_kernel(
        op,
        *sample.args,
        kwargs=sample.kwargs,
        reference=sample.reference,
        other_args=sample.other_args,
    )
    ran = {row.family for row in report.passed}
    assert {"results", "backends", "vmap", "compile", "export", "threads", "bad_inputs"} <= ran
    # Every example but lif_step (a threshold: no derivative) has AD rules.
    assert ("autodiff" in ran) == (op is not lif_step), str(report)
    assert ("sharding" in ran) == (op.sharding_rule is not None), str(report)
