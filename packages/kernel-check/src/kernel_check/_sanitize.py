"""Check of GPU memory accesses (``check_kernel(..., sanitize=True)``): the op
run in a child process under NVIDIA's ``compute-sanitizer`` (its memcheck
tool), each kernel's out-of-bounds and misaligned accesses a failed row.

The child imports the module that defines the op (``export_imports``, else
the op's own module), finds the op there by identity, and calls it on the
sample inputs, with the keywords (JSON values and ``jax.ShapeDtypeStruct``
outputs) given in a file. Without a GPU (as the CUDA launcher sees them) or
without ``compute-sanitizer`` (on ``PATH`` or in ``$CUDA_HOME/bin``) the row
is skipped and says why. The child's JAX takes each buffer from CUDA's stream-ordered allocator
(``XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async``), so that memcheck sees an access
one element past a buffer's end.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import jax

from ._case import Case, describe_error
from ._child import save
from ._report import CheckResult, failed, passed, skipped

__all__ = ["MemcheckError", "check_sanitize", "encode_kwargs", "parse_memcheck"]

_CHECK = "sanitize: memcheck"
_TIMEOUT_S = 600
# The child's JAX takes each buffer from CUDA's stream-ordered allocator
# (cudaMallocAsync), whose allocations memcheck tracks one by one: an access one
# element past a buffer's end is then reported. With JAX's default pool, or its
# "platform" allocator, such an overrun lands in memory memcheck counts as
# allocated and goes unseen (both measured on an H100, jax 0.11.2).
_CHILD_ENV = {"XLA_PYTHON_CLIENT_ALLOCATOR": "cuda_async", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
_PREFIX = "========="
_HEADER = re.compile(
    r"^(Invalid __\w+__ (?:read|write|atomic)\b.*|Misaligned .*|Out-of-range .*"
    r"|Invalid (?:shared|local|global) .*|Address .* is misaligned.*)$"
)
# "at saxpy+0x70 in file.cu:5" (CUDA 12) or "at 0x70 in saxpy" (older)
_AT = re.compile(r"^at (?:0x[0-9a-fA-F]+ in )?([^\s+]+)")


@dataclasses.dataclass(frozen=True)
class MemcheckError:
    """One error memcheck reported: its kernel, what it is, and where."""

    kernel: str
    kind: str  # "out of bounds", "misaligned" or memcheck's own words
    detail: str


def parse_memcheck(output: str) -> list[MemcheckError]:
    """The errors in ``compute-sanitizer --tool memcheck`` output, in order.

    Example:
        >>> out = '''========= Invalid __global__ write of size 4 bytes
        ... =========     at saxpy+0x70 in k.cu:5
        ... =========     by thread (8,0,0) in block (0,0,0)
        ... =========     Address 0x7f00 is out of bounds
        ... ========= ERROR SUMMARY: 1 error'''
        >>> parse_memcheck(out)[0].kernel, parse_memcheck(out)[0].kind
        ('saxpy', 'out of bounds')
    """
    errors: list[MemcheckError] = []
    block: list[str] = []

    def close() -> None:
        if not block:
            return
        kernel = next((m.group(1) for line in block[1:] if (m := _AT.match(line))), "?")
        text = " ".join(block).lower()
        kind = (
            "misaligned"
            if "misaligned" in text
            else "out of bounds"
            if "out of bounds" in text or "out-of-range" in text
            else block[0]
        )
        detail = "; ".join([block[0], *(line for line in block[1:] if not _AT.match(line))])
        errors.append(MemcheckError(kernel, kind, detail))
        block.clear()

    for raw in output.splitlines():
        if not raw.startswith(_PREFIX):
            continue
        line = raw[len(_PREFIX) :]
        text = line.strip()
        if line[:1] == " " and line[:2] != "  " and _HEADER.match(text):
            close()
            block.append(text)
        elif block and line.startswith("  ") and text:
            block.append(text)
        else:
            close()
    close()
    return errors


def find_sanitizer() -> str | None:
    """The ``compute-sanitizer`` executable: on ``PATH``, or in ``$CUDA_HOME/bin``
    (``$CUDA_PATH/bin`` where ``CUDA_HOME`` is not set)."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        candidate = pathlib.Path(home, "bin", "compute-sanitizer")
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _gpus() -> Sequence[Any]:
    # The GPUs as the CUDA launcher sees them (JAX's CUDA devices).
    from ffi_core.bridge.cuda import cuda_devices

    try:
        return cuda_devices("the sanitize check")
    except RuntimeError:
        return ()


def encode_kwargs(kwargs: Mapping[str, Any]) -> Any:
    """``kwargs`` as JSON: numbers, strings, None, lists and tuples of them, and
    ``jax.ShapeDtypeStruct``; a TypeError naming anything else."""

    def one(value: Any, where: str) -> Any:
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if isinstance(value, jax.ShapeDtypeStruct):
            return {"shape": list(value.shape), "dtype": str(value.dtype)}
        if isinstance(value, list | tuple):
            items = [one(v, f"{where}[{k}]") for k, v in enumerate(value)]
            return {"tuple": items} if isinstance(value, tuple) else items
        raise TypeError(f"`kwargs` {where} is a {type(value).__qualname__}")

    return {name: one(value, name) for name, value in kwargs.items()}


def _locate(op: Any, modules: Sequence[str]) -> tuple[str, str] | None:
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for attr, value in vars(module).items():
            if value is op:
                return name, attr
    return None


def check_sanitize(case: Case) -> list[CheckResult]:
    """The op's GPU kernels under memcheck, when ``sanitize=True``."""
    if _CHECK in case.excluded:
        return [skipped(_CHECK, case.excluded[_CHECK])]
    if not case.options.sanitize or not case.wants(_CHECK):
        return []
    try:
        out = _sanitize(case)
    except Exception as exc:  # the row fails; the other rows still run
        return [failed(_CHECK, f"raised {describe_error(exc)}")]
    return out if isinstance(out, list) else [out]


def _sanitize(case: Case) -> CheckResult | list[CheckResult]:
    if not _gpus():
        return skipped(_CHECK, "no NVIDIA GPU: the CUDA launcher sees no device")
    sanitizer = find_sanitizer()
    if sanitizer is None:
        return skipped(
            _CHECK, "compute-sanitizer was not found on PATH or in $CUDA_HOME/bin (CUDA toolkit)"
        )
    op = case.options.signature_of
    modules = case.options.export_imports or (getattr(op, "__module__", None) or "__main__",)
    where = _locate(op, [m for m in modules if m != "__main__"])
    if where is None:
        return skipped(
            _CHECK,
            f"the op is not an attribute of {', '.join(modules)}, which a child process "
            "imports to run it; give `export_imports`, the module that defines it",
        )
    try:
        kwargs = encode_kwargs(case.options.kwargs or {})
    except TypeError as exc:
        return skipped(_CHECK, f"{exc}, which a child process cannot be given")
    with tempfile.TemporaryDirectory(prefix="check_kernel_sanitize_") as tmp:
        folder = pathlib.Path(tmp)
        save(folder, "args", case.args)
        (folder / "kwargs.json").write_text(json.dumps(kwargs))
        command = [
            sanitizer,
            "--tool",
            "memcheck",
            "--print-limit",
            "100",
            sys.executable,
            "-m",
            "kernel_check._sanitize_child",
            str(folder),
            *where,
        ]
        env = {**os.environ, **_CHILD_ENV, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        try:
            result = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            return failed(_CHECK, f"the sanitized process did not finish in {_TIMEOUT_S} s")
    errors = parse_memcheck(result.stdout + "\n" + result.stderr)
    if errors:
        return _per_kernel(errors)
    return [_outcome(result, where, sanitizer)]


def _outcome(result: Any, where: tuple[str, str], sanitizer: str) -> CheckResult:
    if result.returncode != 0:
        lines = [s for s in (result.stderr or result.stdout).splitlines() if s.strip()]
        last = lines[-1].strip() if lines else f"exit status {result.returncode}"
        return failed(_CHECK, f"the sanitized process failed: {last}")
    return passed(_CHECK, f"no memcheck errors ({' '.join(where)} run under {sanitizer})")


def _per_kernel(errors: Sequence[MemcheckError]) -> list[CheckResult]:
    by_kernel: dict[str, list[MemcheckError]] = {}
    for error in errors:
        by_kernel.setdefault(error.kernel, []).append(error)
    rows = []
    for kernel, found in by_kernel.items():
        kinds = ", ".join(dict.fromkeys(e.kind for e in found))
        count = f"{len(found)} error{'s' if len(found) > 1 else ''}"
        rows.append(
            failed(f"{_CHECK}: kernel {kernel!r}", f"{count} ({kinds}); first: {found[0].detail}")
        )
    return rows
