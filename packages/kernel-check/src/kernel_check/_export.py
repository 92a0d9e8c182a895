"""Check of export: ``ffi_core.export`` -> ``serialize``, then ``deserialize``
and call in a fresh Python process, which must give the op's results.

The fresh process imports the modules that define the op's kernels (the
``export_imports`` option), as a program loading the blob would, and nothing
else (the blob is signed with a key made for the check, and verified there): a kernel whose FFI target name depends on the process (an address, a
counter, a random value in its digest) is not found there.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Sequence

import jax
from ffi_core import deserialize, export, serialize

from ._case import Case, describe_error
from ._child import load, save
from ._report import CheckResult, failed, passed, skipped

__all__ = ["check_export"]

_CHECK = "export: in a fresh process"
_TIMEOUT_S = 300


def _environment() -> dict[str, str]:
    # The child finds what this process imports by name: this process's
    # sys.path. Everything else (XLA_FLAGS, cache folders) it inherits.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def _unimportable(modules: Sequence[str]) -> list[str]:
    missing = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found or name == "__main__":
            missing.append(name)
    return missing


def check_export(case: Case) -> list[CheckResult]:
    """Export, serialize, and deserialize and call in a fresh process."""
    return case.run(_CHECK, lambda: _export(case))


def _export(case: Case) -> CheckResult:
    modules = case.options.export_imports
    if modules is None:
        # The op's own module, where that is a user's module: a bridge's
        # wrapper lives in the bridge's private module, which defines no kernel.
        module = getattr(case.options.signature_of, "__module__", None) or "__main__"
        if any(part.startswith("_") for part in module.split(".")):
            return skipped(
                _CHECK,
                f"give `export_imports`, the modules that define the op's kernels (the op's "
                f"own module, {module}, is not one)",
            )
        modules = (module,)
    missing = _unimportable(modules)
    if missing:
        return skipped(
            _CHECK,
            f"a fresh process cannot import {', '.join(missing)}; give `export_imports`, the "
            "modules that define the op's kernels",
        )
    # Signed with a key made for this check, which the fresh process reads
    # from the check's private folder: the blob is verified there as a user's would be.
    key = secrets.token_bytes(32)
    try:
        blob = serialize(export(case.fn)(*case.args), key=key)
        here = jax.tree.leaves(deserialize(blob, key=key).call(*case.args))
    except Exception as exc:
        return failed(_CHECK, f"export in this process raised {describe_error(exc)}")
    row = case.compare(_CHECK, jax.tree.leaves(case.expected), here, ("op", "exported"))
    if row.detail:
        return failed(_CHECK, f"in this process: {row.detail}")
    with tempfile.TemporaryDirectory(prefix="check_kernel_export_") as tmp:
        folder = pathlib.Path(tmp)
        (folder / "op.blob").write_bytes(blob)
        (folder / "op.key").write_bytes(key)
        save(folder, "args", case.args)
        try:
            result = subprocess.run(
                [sys.executable, "-m", "kernel_check._child", str(folder), *modules],
                env=_environment(),
                capture_output=True,
                text=True,
                timeout=_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return failed(_CHECK, f"the fresh process did not finish in {_TIMEOUT_S} s")
        if result.returncode != 0:
            lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
            last = lines[-1] if lines else f"exit status {result.returncode}"
            imported = ", ".join(modules) or "nothing"
            return failed(_CHECK, f"the fresh process (which imported {imported}) failed: {last}")
        there = load(folder, "outs")
    row = case.compare(_CHECK, jax.tree.leaves(case.expected), there, ("op", "fresh process"))
    if row.detail:
        return row
    return passed(_CHECK, f"deserialized and called after importing {', '.join(modules)}")
