"""Build every package's wheel and try each public package alone, as a user would.

For each package: a fresh virtual environment outside the workspace, the package's
wheel (and the wheels of the sibling packages it declares) installed with its
declared dependencies from the package index, then its README's first example
runs in that environment, and for some packages a feature check (numba-cpu-ffi's
export round trip, ``kernel-bench list``, ``check_kernel``); the wheel's metadata
(its index page) is checked too. An undeclared run-time dependency fails here, where the workspace's
dev group would hide it.

    uv run python tools/wheel_smoke.py                 # every package
    uv run python tools/wheel_smoke.py numba-cpu-ffi   # some
    uv run python tools/wheel_smoke.py --dist DIR      # and keep the wheels in DIR
    uv run python tools/wheel_smoke.py --jobs 1        # one package at a time

The environments are made by ``uv venv`` and filled by ``uv pip install``, which
resolves from the wheels' own metadata exactly as pip does, but from uv's cache
(pip would download or unpack jax, numba and LLVM again for every package).
On a machine without an NVIDIA GPU, the GPU packages' examples run up to the
launch, which must fail with the launcher's clear "no GPU" error: that proves
the package and its compiler (Triton, NVRTC, numba-cuda) import and compile.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import email.message
import email.parser
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "packages" / "ffi-core" / "src"))
from ffi_core.testing import readme_python_blocks  # noqa: E402  (standard library only)

_NO_GPU = re.compile(r"RuntimeError: .*(has no CUDA device here|no (NVIDIA )?GPU)", re.I)

# Runs after the README examples, in the same environment: an export round trip
# through the package's own kernels (needs flatbuffers, which only jax.export uses).
_EXPORT_ROUND_TRIP = """
import jax, jax.numpy as jnp, numba, ffi_core
from numba_cpu_ffi import numba_kernel

@numba.njit
def twice(x, out):
    for i in range(x.size):
        out[i] = 2 * x[i]

x = jnp.arange(4.0, dtype=jnp.float32)
op = jax.jit(numba_kernel(twice, jax.ShapeDtypeStruct(x.shape, x.dtype)))
blob = ffi_core.serialize(ffi_core.export(op)(x))
assert (ffi_core.deserialize(blob).call(x) == 2 * x).all()
print("export round trip: ok")
"""

_BENCH_CLI = """
import pathlib, subprocess, sys
script = pathlib.Path(sys.executable).parent / "kernel-bench"
out = subprocess.run([str(script), "list"], capture_output=True, text=True)
assert out.returncode == 0, out.stderr
assert "axpy" in out.stdout, out.stdout
print("kernel-bench list: ok")
"""

# kernel-check alone: check_kernel on a JAX function, and the old name in
# ffi-core forwarding to it with its DeprecationWarning.
_CHECK_KERNEL = """
import warnings
import jax.numpy as jnp
import kernel_check

report = kernel_check.check_kernel(
    lambda x: x * 2.0, jnp.arange(4.0), reference=lambda x: 2 * x, checks=["results", "vmap"]
)
assert report.ok and report.passed, report
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from ffi_core.checking import check_kernel
assert check_kernel is kernel_check.check_kernel
assert [w.category for w in caught] == [DeprecationWarning], caught
print("check_kernel, and ffi_core.checking forwarding to it: ok")
"""

# package -> (extras to install, extra smoke programs, whether the README needs a GPU)
PACKAGES: dict[str, tuple[str, list[str], bool]] = {
    "ffi-core": ("native", [], False),
    "numba-cpu-ffi": ("", [_EXPORT_ROUND_TRIP], False),
    "warp-ffi": ("", [], False),
    "xla-custom-kernel": ("numba", [], False),
    "kernel-bench": ("", [_BENCH_CLI], False),
    "kernel-check": ("", [_CHECK_KERNEL], False),
    "numba-cuda-ffi": ("cu13", [], True),
    "triton-ffi": ("", [], True),
    "cuda-source-ffi": ("cu13", [], True),
}


def _wheel_requirements(wheel: pathlib.Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(name).decode())
    return metadata.get_all("Requires-Dist") or []


_PROJECT_URLS = ("Homepage", "Documentation", "Repository", "Changelog", "Issues")
_RELATIVE_LINK = re.compile(r"\]\((?!https?:|#)([^)\s]*)\)")


def _metadata(wheel: pathlib.Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(archive.read(name).decode())


def page_problems(wheel: pathlib.Path) -> list[str]:
    """What would read badly on the package index's page of this wheel: a link of the
    README (the long description) that is relative, so broken outside the repository;
    a missing Project-URL, licence, classifier or author."""
    metadata = _metadata(wheel)
    problems = [
        f"README link {target!r} is relative"
        for target in _RELATIVE_LINK.findall(metadata.get_payload())
    ]
    labels = {url.partition(",")[0] for url in metadata.get_all("Project-URL") or []}
    problems += [f"no Project-URL {label!r}" for label in _PROJECT_URLS if label not in labels]
    for field in ("License-Expression", "License-File", "Classifier", "Author", "Keywords"):
        if not metadata.get_all(field):
            problems.append(f"no {field}")
    return problems


def _siblings(package: str, extras: str, wheels: dict[str, pathlib.Path]) -> set[str]:
    """The workspace packages ``package[extras]`` needs, itself included."""
    wanted = {extra for extra in extras.split(",") if extra}
    found = {package}
    for requirement in _wheel_requirements(wheels[package]):
        match = re.match(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?", requirement)
        name = match.group(1).lower().replace("_", "-")
        marker = requirement.partition(";")[2]
        extra = re.search(r"extra == ['\"]([^'\"]+)['\"]", marker)
        if extra and extra.group(1) not in wanted:
            continue
        if name in wheels and name not in found:
            sub_extras = (match.group(2) or "[]")[1:-1]
            found |= _siblings(name, sub_extras, wheels)
    return found


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kwargs)


def smoke(
    package: str, wheels: dict[str, pathlib.Path], scratch: pathlib.Path
) -> tuple[list[str], list[str]]:
    """Problems found for ``package`` (empty when it works alone), and a line
    for each program that ran. Packages may be tried at once: each has its own
    environment, programs and caches under ``scratch``."""
    extras, programs, needs_gpu = PACKAGES[package]
    venv = scratch / f"venv-{package}"
    made = _run(["uv", "venv", "--quiet", "--python", sys.executable, str(venv)])
    if made.returncode:
        return [f"uv venv failed: {made.stderr.strip()}"], []
    python = venv / "bin" / "python"
    targets = [
        f"{name}{f'[{extras}]' if name == package and extras else ''} @ {wheels[name].as_uri()}"
        for name in sorted(_siblings(package, extras, wheels))
    ]
    installed = _run(["uv", "pip", "install", "--quiet", "--python", str(python), *targets])
    if installed.returncode:
        return [f"install failed: {installed.stderr.strip()[-2000:]}"], []
    problems, lines = [], []
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["XDG_CACHE_HOME"] = str(scratch / f"cache-{package}")
    readme = readme_python_blocks(ROOT / "packages" / package)
    for index, code in enumerate([*readme[:1], *programs]):
        label = "README example" if index == 0 and readme else f"feature check {index}"
        # Run from the scratch directory: the workspace's sources must not be importable.
        # From a file: Triton reads a kernel's source with inspect.
        program = scratch / f"{package.replace('-', '_')}_check_{index}.py"
        program.write_text(code)
        done = _run([str(python), str(program)], cwd=scratch, env=env, timeout=600)
        if done.returncode == 0:
            lines.append(f"  {package}: {label}: ok")
        elif needs_gpu and _NO_GPU.search(done.stderr):
            lines.append(f"  {package}: {label}: ran up to the launch (no GPU here)")
        else:
            problems.append(f"{label} failed:\n{textwrap.indent(done.stderr[-3000:], '    ')}")
    return problems, lines


def wheels_in(dist: pathlib.Path) -> dict[str, pathlib.Path]:
    """The wheels in ``dist``, by package name (``ffi-core``)."""
    return {wheel.name.split("-")[0].replace("_", "-"): wheel for wheel in dist.glob("*.whl")}


def build_wheels(dist: pathlib.Path) -> dict[str, pathlib.Path] | None:
    """Build every package's wheel into ``dist``; None (the error printed) when
    the build fails."""
    start = time.perf_counter()
    built = _run(["uv", "build", "--all-packages", "--wheel", "-o", str(dist)], cwd=ROOT)
    if built.returncode:
        print(built.stderr)
        return None
    wheels = wheels_in(dist)
    print(f"built {len(wheels)} wheels in {time.perf_counter() - start:.1f} s")
    return wheels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("packages", nargs="*", choices=[[], *PACKAGES], default=[])
    parser.add_argument(
        "--dist", type=pathlib.Path, help="build the wheels into DIR and keep them there"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1,
        help="packages tried at once (default: the CPUs this process may run on)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs: packages tried at once, at least 1; got {args.jobs}")
    chosen = args.packages or list(PACKAGES)
    with tempfile.TemporaryDirectory(prefix="wheel-smoke-") as tmp:
        scratch = pathlib.Path(tmp)
        wheels = build_wheels(args.dist or scratch / "dist")
        if wheels is None:
            return 1
        failed = {}
        for package in chosen:
            if problems := page_problems(wheels[package]):
                failed[package] = problems
            else:
                print(f"  {package}: index page metadata: ok")

        def timed(package: str) -> tuple[list[str], list[str], float]:
            start = time.perf_counter()
            return *smoke(package, wheels, scratch), time.perf_counter() - start

        # The work is in the packages' own processes: a thread each waits on them.
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for package, (problems, lines, seconds) in zip(
                chosen, pool.map(timed, chosen), strict=True
            ):
                problems = failed.get(package, []) + problems
                verdict = f"{package}: {'ok' if not problems else 'FAILED'} ({seconds:.1f} s)"
                print("\n".join([*lines, verdict]), flush=True)
                if problems:
                    failed[package] = problems
        for package, problems in failed.items():
            print(f"\n{package}:")
            for problem in problems:
                print(textwrap.indent(problem, "  "))
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
