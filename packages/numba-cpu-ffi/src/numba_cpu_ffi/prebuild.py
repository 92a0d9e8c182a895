"""Build a library's kernels ahead of time, into a directory it ships.

Every numba kernel's first call compiles it (and, once per call shape, the
shared handler). A library can do that work once, when it is packaged, and
ship the result: its users' processes then load compiled code and compile
nothing. Run::

    python -m numba_cpu_ffi.prebuild my_library.prebuild:kernels --out my_library/kernels --jobs 4

Each TARGET is ``module`` or ``module:function``. The module is imported (and
the function called) in worker processes whose cache directory is ``--out``,
so every kernel they lower (``jax.jit(op).lower(*args)`` is enough) or call
is built into it. The function may return an iterable of callables, each a
unit of work (for example one operation at one dtype); with ``--jobs N`` the
units are shared among N processes, each importing the module and running
every N-th unit, so the function must return them in the same order each
time.

The library then reads the directory at import::

    import importlib.resources, numba_cpu_ffi
    numba_cpu_ffi.add_prebuilt_dir(importlib.resources.files(__name__) / "kernels")

or its users name it in ``$NUMBA_CPU_FFI_PREBUILT``. Compiled code is for the
machine's CPU model (Numba's cache key): a directory built on one CPU model
is a miss, not an error, on another, and the kernel is compiled as usual.
With ``--cpu MODEL`` the workers compile for a portable CPU model instead
(``generic``, or on x86-64 ``x86-64-v2``, ``x86-64-v3``, ``x86-64-v4``:
``ffi_core.abi.native.PORTABLE_CPUS``), and the directory serves every
machine that has that model's features. Run it once per model to ship
several: a process loads code for its own CPU model first, then the best
portable model it runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ffi_core import checked_cache_dir
from ffi_core.abi.native import portable_cpus

from ._cache import CACHE_ENV, PREBUILT_ENV, ignore_prebuilt_dirs

__all__ = ["PrebuildError", "PrebuildResult", "build", "main"]


class PrebuildError(RuntimeError):
    """A worker process of :func:`build` failed; the message holds its output."""


@dataclasses.dataclass(frozen=True)
class PrebuildResult:
    """What :func:`build` left in ``out``: the compiled entries (``.nbi``
    index files: one per kernel form and per shared handler and batch loop)
    and every file."""

    out: Path
    entries: int
    files: int


def _check_target(target: Any) -> tuple[str, str | None]:
    module, sep, function = target.partition(":") if isinstance(target, str) else ("", "", "")
    if not module or (sep and not function) or ":" in function:
        raise ValueError(
            f"each target must be 'module' or 'module:function' (a str), got {target!r}"
        )
    return module, function or None


def build(
    targets: str | Sequence[str],
    out: str | os.PathLike[str],
    *,
    jobs: int = 1,
    cpu: str | None = None,
) -> PrebuildResult:
    """Build the kernels that ``targets`` lower or call into ``out``.

    Args:
        targets: ``"module"`` or ``"module:function"``, or a sequence of
            them (see the module's docstring for what the function does).
        out: the directory to build into (created with mode 0700); what is
            there already is kept and reused.
        jobs: worker processes per target (units of work are shared among them).
        cpu: None to compile for this machine's CPU model; or a portable model
            this machine runs (``ffi_core.abi.native.portable_cpus()``), whose
            code loads on every machine with its features.

    Returns:
        A :class:`PrebuildResult`.

    Raises:
        TypeError: ``targets`` that is no str or sequence, an ``out`` that is no path.
        ValueError: a malformed target, ``jobs`` below 1, a ``cpu`` this
            machine cannot run code for, or ``out`` refused as a cache
            directory (a symlink, someone else's, writable by others).
        PrebuildError: a worker failed (its output is in the message).
    """
    if not isinstance(targets, str | Iterable):
        raise TypeError(
            "`targets` must be 'module' or 'module:function' (a str) or a sequence of them, "
            f"got {type(targets).__name__}"
        )
    if not isinstance(out, str | os.PathLike):
        raise TypeError(f"`out` must be a directory path (str or os.PathLike), got {out!r}")
    names = [targets] if isinstance(targets, str) else list(targets)
    if not names:
        raise ValueError("`targets` must name at least one module")
    for target in names:
        _check_target(target)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"`jobs` must be an int of at least 1, got {jobs!r}")
    if cpu is not None and cpu not in portable_cpus():
        # The workers run what they build: only a model this machine runs.
        raise ValueError(
            f"`cpu` must be None (this machine's CPU model) or a portable CPU model this "
            f"machine runs code for, one of {', '.join(map(repr, portable_cpus()))}; got {cpu!r}"
        )
    directory = checked_cache_dir(Path(out).absolute(), purpose="the prebuilt kernels", warn=False)
    if directory is None:
        raise ValueError(
            f"`out` {str(out)!r} cannot hold compiled kernels: it must be a directory that only "
            "you own and may write (it is created with mode 0700 when missing)"
        )
    # The workers compile everything into `out`: no prebuilt directory of the
    # caller's ($NUMBA_CPU_FFI_PREBUILT, or one a library adds at import) may
    # serve a kernel instead (`_run_worker` reads none).
    env = {**os.environ, CACHE_ENV: str(directory)}
    env.pop(PREBUILT_ENV, None)
    if cpu is not None:
        # Numba's settings, in the workers' environment only: code for the
        # model with its own features, none of this machine's.
        env |= {"NUMBA_CPU_NAME": cpu, "NUMBA_CPU_FEATURES": ""}
    # The worker imports targets by name: the caller's sys.path, as the CLI's.
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.getcwd(), *sys.path] if p)
    workers = [
        (
            f"{target} (worker {k + 1} of {jobs})",
            subprocess.Popen(
                [sys.executable, "-m", "numba_cpu_ffi.prebuild", "--worker", f"{k}/{jobs}", target],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            ),
        )
        for target in names
        for k in range(jobs)
    ]
    failures = []
    for label, worker in workers:
        output, _ = worker.communicate()
        if worker.returncode != 0:
            failures.append(f"{label}, exit {worker.returncode}:\n{output}")
    if failures:
        raise PrebuildError("prebuilding failed in " + "\n".join(failures))
    files = [p for p in directory.iterdir() if p.is_file() and not p.is_symlink()]
    for path in files:
        # A prebuilt file that group or others may write is not read (its
        # code would run in its users' processes): none is left so, whatever
        # the workers' umask.
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & (stat.S_IWGRP | stat.S_IWOTH):
            path.chmod(mode & ~(stat.S_IWGRP | stat.S_IWOTH))
    return PrebuildResult(directory, sum(p.suffix == ".nbi" for p in files), len(files))


def _run_worker(target: str, share: str) -> None:
    index, _, count = share.partition("/")
    k, n = int(index), int(count)
    ignore_prebuilt_dirs()
    module_name, function = _check_target(target)
    module = importlib.import_module(module_name)
    if function is None:
        return
    units = getattr(module, function)()
    if units is None:
        return
    for i, unit in enumerate(_units(units, target)):
        if i % n == k:
            unit()


def _units(units: Any, target: str) -> Iterable[Callable[[], Any]]:
    if not isinstance(units, Iterable):
        raise TypeError(
            f"{target} must return None or an iterable of callables, got {type(units)!r}"
        )
    for unit in units:
        if not callable(unit):
            raise TypeError(f"{target} returned a unit that is not callable: {unit!r}")
        yield unit


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``python -m numba_cpu_ffi.prebuild TARGET ... --out DIR``."""
    parser = argparse.ArgumentParser(
        prog="python -m numba_cpu_ffi.prebuild",
        description="Build a library's numba kernels ahead of time into a directory it ships.",
    )
    parser.add_argument("targets", nargs="+", metavar="TARGET", help="module or module:function")
    parser.add_argument("--out", help="the directory to build into")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes per target")
    parser.add_argument(
        "--cpu",
        help="compile for this portable CPU model instead of this machine's "
        f"(one of: {', '.join(portable_cpus())})",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        _run_worker(args.targets[0], args.worker)
        return 0
    if args.out is None:
        parser.error("--out is required")
    try:
        result = build(args.targets, args.out, jobs=args.jobs, cpu=args.cpu)
    except (ValueError, PrebuildError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"{result.entries} compiled entries, {result.files} files in {result.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
