"""check_kernel(..., sanitize=True): the op in a child process under
compute-sanitizer's memcheck, a failed row per kernel with an out-of-bounds or
misaligned access; skipped, saying why, without a GPU or the tool.

On a CPU machine the GPU is the emulated one (what the CUDA launcher sees as
its devices) and compute-sanitizer a script that prints memcheck's report and
runs the command it wraps, so the finding, the child and the parsing are what
is tested."""

from __future__ import annotations

import os
import re
import stat
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ffi_core.bridge.cuda.testing import EmulatedGPU, emulate
from kernel_check import CheckResult, Status, check_kernel
from kernel_check._sanitize import MemcheckError, parse_memcheck

X = np.arange(8, dtype=np.float32)

REPORT = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at saxpy+0x70 in /src/k.cu:5
=========     by thread (8,0,0) in block (0,0,0)
=========     Address 0x7f2c4e000020 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f2c4e000000 of size 32 bytes
=========
========= Invalid __global__ read of size 4 bytes
=========     at saxpy+0x50 in /src/k.cu:5
=========     by thread (9,0,0) in block (0,0,0)
=========     Address 0x7f2c4e000024 is out of bounds
=========
========= Invalid __global__ read of size 8 bytes
=========     at 0x1b0 in scale_rows
=========     by thread (0,0,0) in block (1,0,0)
=========     Address 0x7f2c4e000103 is misaligned
=========
========= ERROR SUMMARY: 3 errors
"""


def double(x):
    """The op the child process imports from this module and runs."""
    return 2 * x


def test_memcheck_output_is_read_per_error():
    errors = parse_memcheck("noise\n" + REPORT)
    assert [(e.kernel, e.kind) for e in errors] == [
        ("saxpy", "out of bounds"),
        ("saxpy", "out of bounds"),
        ("scale_rows", "misaligned"),
    ]
    assert errors[0] == MemcheckError(
        "saxpy",
        "out of bounds",
        "Invalid __global__ write of size 4 bytes; by thread (8,0,0) in block (0,0,0); Address "
        "0x7f2c4e000020 is out of bounds; and is 1 bytes after the nearest allocation at "
        "0x7f2c4e000000 of size 32 bytes",
    )
    assert parse_memcheck("========= ERROR SUMMARY: 0 errors\n") == []


def _fake_sanitizer(folder, report: str, child_env=None) -> None:
    # Prints `report` as memcheck would, then runs the program it wraps (what
    # follows its own options), and exits with that program's status.
    script = folder / "compute-sanitizer"
    script.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            f"""
            import os, subprocess, sys
            args = sys.argv[1:]
            while args and args[0].startswith("--"):
                args = args[2:]
            print({report!r}, end="")
            env = dict(os.environ, **{dict(child_env or {})!r})
            sys.exit(subprocess.run(args, env=env).returncode)
            """
        )
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def sanitizer_path(tmp_path, monkeypatch):
    """PATH holding only a folder for a fake compute-sanitizer (and no $CUDA_HOME)."""
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.path.dirname(sys.executable)}")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    return tmp_path


def _sanitize_rows(op, *args, **options):
    report = check_kernel(op, *args, checks=["sanitize"], sanitize=True, raises=False, **options)
    return report.results


def test_without_a_gpu_the_row_is_skipped_with_its_reason():
    assert _sanitize_rows(double, X, export_imports=[__name__]) == (
        CheckResult(
            "sanitize: memcheck", Status.SKIPPED, "no NVIDIA GPU: the CUDA launcher sees no device"
        ),
    )


def test_without_compute_sanitizer_the_row_is_skipped_with_its_reason(sanitizer_path):
    with emulate(EmulatedGPU()):
        rows = _sanitize_rows(double, X, export_imports=[__name__])
    assert rows == (
        CheckResult(
            "sanitize: memcheck",
            Status.SKIPPED,
            "compute-sanitizer was not found on PATH or in $CUDA_HOME/bin (CUDA toolkit)",
        ),
    )


def test_each_kernel_with_bad_accesses_is_a_failed_row(sanitizer_path):
    _fake_sanitizer(sanitizer_path, REPORT)
    with emulate(EmulatedGPU()):
        rows = _sanitize_rows(double, X, export_imports=[__name__])
    assert [(r.check, r.status) for r in rows] == [
        ("sanitize: memcheck: kernel 'saxpy'", Status.FAILED),
        ("sanitize: memcheck: kernel 'scale_rows'", Status.FAILED),
    ]
    assert rows[0].detail.startswith(
        "2 errors (out of bounds); first: Invalid __global__ write of size 4 bytes; by thread "
        "(8,0,0) in block (0,0,0)"
    )
    assert rows[1].detail.startswith("1 error (misaligned); first: Invalid __global__ read")


def test_a_clean_run_passes_and_the_child_ran_the_op(sanitizer_path, tmp_path):
    _fake_sanitizer(sanitizer_path, "========= ERROR SUMMARY: 0 errors\n")
    with emulate(EmulatedGPU()):
        rows = _sanitize_rows(double, X, export_imports=[__name__])
    assert [(r.check, r.status) for r in rows] == [("sanitize: memcheck", Status.PASSED)]
    assert rows[0].detail.startswith(f"no memcheck errors ({__name__} double run under ")


def allocator(x):
    """An op that raises in the sanitized child, naming the child's JAX allocator."""
    if os.environ.get("FFI_CORE_TESTS_SANITIZED"):
        raise ValueError(
            f"allocator {os.environ.get('XLA_PYTHON_CLIENT_ALLOCATOR')} "
            f"preallocate {os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE')}"
        )
    return x


def test_the_child_allocates_each_buffer_on_its_own(sanitizer_path):
    # memcheck sees an overrun of a buffer only when the buffer is an allocation
    # it tracks (cudaMallocAsync), not inside JAX's pool.
    _fake_sanitizer(sanitizer_path, "", child_env={"FFI_CORE_TESTS_SANITIZED": "1"})
    with emulate(EmulatedGPU()):
        rows = _sanitize_rows(allocator, X, export_imports=[__name__])
    assert [r.detail for r in rows] == [
        "the sanitized process failed: ValueError: allocator cuda_async preallocate false"
    ]


def scaled(x, *, outs, scale):
    """An op that raises in the sanitized child (which the fake tool marks), naming its keywords."""
    if os.environ.get("FFI_CORE_TESTS_SANITIZED"):
        raise ValueError(f"scale {scale} with outs {tuple(outs.shape)} in the child")
    return scale * x


def test_the_child_gets_the_keywords_and_its_failure_is_reported(sanitizer_path):
    _fake_sanitizer(sanitizer_path, "", child_env={"FFI_CORE_TESTS_SANITIZED": "1"})
    with emulate(EmulatedGPU()):
        rows = _sanitize_rows(
            scaled,
            X,
            kwargs={"outs": jax.ShapeDtypeStruct((8,), jnp.float32), "scale": 0.5},
            export_imports=[__name__],
        )
    assert rows == (
        CheckResult(
            "sanitize: memcheck",
            Status.FAILED,
            "the sanitized process failed: ValueError: scale 0.5 with outs (8,) in the child",
        ),
    )


def test_an_op_no_child_can_import_is_skipped_with_its_reason(sanitizer_path):
    _fake_sanitizer(sanitizer_path, "")
    with emulate(EmulatedGPU()):
        rows = _sanitize_rows(lambda x: 2 * x, X)
    assert rows == (
        CheckResult(
            "sanitize: memcheck",
            Status.SKIPPED,
            f"the op is not an attribute of {__name__}, which a child process imports to run "
            "it; give `export_imports`, the module that defines it",
        ),
    )


def test_without_sanitize_there_is_no_row():
    assert check_kernel(double, X, checks=["sanitize"], raises=False).results == ()


def test_sanitize_must_be_a_bool():
    with pytest.raises(TypeError, match=re.escape("`sanitize` must be a bool, got <class 'str'>")):
        check_kernel(double, X, sanitize="yes")
