"""Install the downstream example library from the built wheels and run its tests.

tests-integration/downstream_example/ is a small library written on these
packages as a user writes one: its own pyproject.toml, an ``XLACustomKernel``
with a numba and a jax backend, JVP and transpose rules, a sharding rule and
benchmark data, and its own pytest suite (``check_kernel``, a benchmark, the
``kernel-bench`` command, an export round trip). This copies it out of the
repository, installs it with the workspace's wheels into a fresh virtual
environment (its other dependencies from the package index, through uv's
cache) and runs its tests there, where only the wheels' code is importable.

    uv run python tools/downstream_example.py                 # builds the wheels
    uv run python tools/downstream_example.py --wheels DIR    # wheels built already
                                                              # (wheel_smoke.py --dist DIR)
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

TOOLS = pathlib.Path(__file__).resolve().parent
ROOT = TOOLS.parent
EXAMPLE = ROOT / "tests-integration" / "downstream_example"
sys.path.insert(0, str(TOOLS))
from wheel_smoke import build_wheels, wheels_in  # noqa: E402

# The workspace packages the example depends on, with their extras: each is
# installed from its wheel by direct reference, so that no package of the same
# name on the index stands in for it.
REQUIREMENTS = {
    "ffi-core": "",
    "numba-cpu-ffi": "",
    "xla-custom-kernel": "numba",
    "kernel-bench": "",
    "kernel-check": "",
}


def run_example(wheels: dict[str, pathlib.Path], scratch: pathlib.Path) -> int:
    """Install the example with ``wheels`` into a fresh environment under
    ``scratch`` and run its tests; pytest's exit status."""
    missing = sorted(set(REQUIREMENTS) - set(wheels))
    if missing:
        print(f"no wheel for {', '.join(missing)} among {sorted(wheels)}")
        return 1
    project = scratch / "downstream_example"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    venv = scratch / "venv"
    start = time.perf_counter()
    subprocess.run(["uv", "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    targets = [
        f"{name}{f'[{extras}]' if extras else ''} @ {wheels[name].as_uri()}"
        for name, extras in REQUIREMENTS.items()
    ]
    installed = subprocess.run(
        ["uv", "pip", "install", "--quiet", "--python", str(python), *targets, f"{project}[test]"],
        capture_output=True,
        text=True,
    )
    if installed.returncode:
        print(f"install failed:\n{installed.stderr[-3000:]}")
        return 1
    print(f"installed the example and its dependencies in {time.perf_counter() - start:.1f} s")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["XDG_CACHE_HOME"] = str(scratch / "cache")
    env["KERNEL_BENCH_AUTOTUNE_DIR"] = str(scratch / "autotune")
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # From the copy: the repository's sources are not importable there.
    tests = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=5"],
        cwd=project,
        env=env,
    )
    return tests.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--wheels", type=pathlib.Path, help="a folder of the built wheels (default: build them)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="downstream-example-") as tmp:
        scratch = pathlib.Path(tmp)
        wheels = wheels_in(args.wheels) if args.wheels else build_wheels(scratch / "dist")
        if not wheels:
            print(f"no wheels in {args.wheels}" if args.wheels else "the wheels did not build")
            return 1
        return run_example(wheels, scratch)


if __name__ == "__main__":
    sys.exit(main())
