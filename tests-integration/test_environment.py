"""Importing the workspace's packages leaves the process's environment alone:
``os.environ`` is shared with every library in the process (an OpenMP wait
policy set at import changes every OpenMP library loaded later)."""

import os
import subprocess
import sys
import textwrap

#: Every package of the workspace, by import name.
PACKAGES = (
    "ffi_core",
    "numba_cpu_ffi",
    "numba_cuda_ffi",
    "warp_ffi",
    "triton_ffi",
    "cuda_source_ffi",
    "xla_custom_kernel",
    "kernel_bench",
    "kernel_check",
)

# Third-party libraries are imported before the first snapshot: what they do
# to the environment (JAX sets TF_CPP_MIN_LOG_LEVEL) is not ours to test.
_SCRIPT = textwrap.dedent(
    """
    import importlib, importlib.util, os, pkgutil, sys

    for library in ("jax", "numba", "numba.cuda", "warp", "triton"):
        if importlib.util.find_spec(library.split(".")[0]) is not None:
            importlib.import_module(library)
    before = dict(os.environ)
    imported = []
    for name in sys.argv[1:]:
        if importlib.util.find_spec(name) is None:
            continue
        package = importlib.import_module(name)
        modules = [name] + [m.name for m in pkgutil.walk_packages(package.__path__, name + ".")]
        for module in modules:
            importlib.import_module(module)
            after = dict(os.environ)
            changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
            assert not changed, f"importing {module} changed {changed}"
        imported.append(name)
    print(" ".join(imported))
    """
)


def test_importing_every_package_leaves_os_environ_unchanged():
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", _SCRIPT, *PACKAGES],
        env={k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    imported = out.stdout.split()
    # The packages every install of the workspace has, at least.
    assert {"ffi_core", "numba_cpu_ffi", "xla_custom_kernel"} <= set(imported), imported
