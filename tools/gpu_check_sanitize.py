"""GPU check of ``check_kernel(..., sanitize=True)`` under NVIDIA's ``compute-sanitizer``.

Run with the other checks by ``tools/gpu_check.py``, or alone from the
repository root: ``uv run python tools/gpu_check_sanitize.py``. For CUDA
source, numba-cuda and Triton, a kernel that reads and writes one float32 past
its 1,024-element buffers (``_gpu_sanitize_ops.py``) must give a failed
``sanitize`` row naming the kernel, and the same kernel kept within bounds a
passed row. Exits 0 when every check passed, 1 when one failed, 2 without a GPU
or without ``compute-sanitizer``.
"""

import os
import sys

from gpu_check import NO_GPU, check

ROW = "sanitize: memcheck"
BRIDGES = {"cuda-source": "cu", "numba-cuda": "nb", "triton": "tr"}


def _rows(op, name: str):
    import jax.numpy as jnp
    from kernel_check import check_kernel

    x = jnp.arange(1024, dtype=jnp.float32)
    report = check_kernel(
        op,
        x,
        kwargs={"n": 1024} if name.startswith("cu_") or name.startswith("tr_") else None,
        checks=["sanitize"],
        sanitize=True,
        export_imports=["_gpu_sanitize_ops"],
        name=name,
        raises=False,
    )
    return report.results


def main() -> int:
    import jax
    from kernel_check._sanitize import find_sanitizer

    if not any(d.platform == "gpu" for d in jax.devices()) or find_sanitizer() is None:
        print("no GPU or no compute-sanitizer", flush=True)
        return NO_GPU
    failed = False
    for bridge, prefix in BRIDGES.items():
        try:
            import _gpu_sanitize_ops as ops

            over, within = f"{prefix}_over_by_one", f"{prefix}_within"
            bad = _rows(getattr(ops, over), over)
            good = _rows(getattr(ops, within), within)
        except Exception as exc:  # one bridge's failure leaves the others' rows
            failed |= not check(f"{bridge}: sanitize", False, f"raised {type(exc).__name__}: {exc}")
            continue
        caught = [r for r in bad if r.status.name == "FAILED" and over in r.check]
        failed |= not check(
            f"{bridge}: overrun found",
            bool(caught),
            "; ".join(f"{r.check}: {r.status.name} {r.detail[:300]}" for r in bad),
        )
        clean = [r.status.name for r in good] == ["PASSED"]
        failed |= not check(
            f"{bridge}: in-bounds kernel passes",
            clean,
            "; ".join(f"{r.check}: {r.status.name} {r.detail[:300]}" for r in good),
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
