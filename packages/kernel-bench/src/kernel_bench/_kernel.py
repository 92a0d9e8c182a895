"""``benchmark_kernel``: every benchmark case of a kernel on every backend of a platform."""

from __future__ import annotations

import contextlib
import functools
import numbers
import os
import platform as _platform
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from kernel_check import first_difference

from ._config import BACKEND_PLATFORMS, BenchmarkConfig
from ._load import OtherLoad, usable_cpus
from ._observed import decision_data, recording
from ._program import InProgram, dispatch_times, program_times, waiting_list, with_measured
from ._record import BenchmarkRecord, failed_record, verbose_line
from ._result import BenchmarkResult
from ._timing import SECONDS_PER_RUN, Timing, chained, check_count
from ._version import __version__

__all__ = [
    "AUTO",
    "BACKEND_PLATFORMS",
    "ResultMismatchError",
    "benchmark_kernel",
    "default_platform",
]

#: The backend name that lets the autotuner choose (``kernel_bench.autotune``).
AUTO = "auto"
_JAX_PLATFORM = {"cpu": "cpu", "cuda": "gpu", "rocm": "gpu", "gpu": "gpu", "tpu": "tpu"}
# JAX appends a note about its filtered traceback frames to errors raised under jit.
_JAX_NOTE = re.compile(r"\n-{20,}\nFor simplicity, JAX has removed its internal frames.*", re.S)


class ResultMismatchError(ValueError):
    """Backends of one kernel gave different results on one benchmark case."""


def default_platform() -> str:
    """The kernel platform of JAX's default backend (``"cuda"`` and ``"rocm"`` are ``"gpu"``)."""
    return _JAX_PLATFORM.get(jax.default_backend(), jax.default_backend())


def _describe(exc: BaseException) -> str:
    return _JAX_NOTE.sub("", f"{type(exc).__name__}: {exc}").strip()


def _mismatch(ref: Any, out: Any, rtol: float, atol: float) -> str | None:
    # kernel-check's comparison, with the caller's tolerances for every dtype present.
    dtypes = {np.asarray(leaf).dtype.name for leaf in jax.tree.leaves((ref, out))}
    return first_difference(
        ref, out, tolerances={name: (rtol, atol) for name in dtypes}, names=("expected", "got")
    )


#: Environment variables that change how the backends run (threads, their
#: wait policy, XLA's options): the records keep those that are set.
ENVIRONMENT = (
    "OMP_WAIT_POLICY",
    "GOMP_SPINCOUNT",
    "OMP_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "NUMBA_THREADING_LAYER",
    "XLA_FLAGS",
    "JAX_PLATFORMS",
    "JAX_ENABLE_X64",
)


def _metadata(platform: str) -> dict[str, Any]:
    device = jax.devices(platform)[0]
    return {
        "platform": platform,
        "device": getattr(device, "device_kind", str(device)),
        "jax": jax.__version__,
        "kernel_bench": __version__,
        "python": _platform.python_version(),
        "machine": _platform.machine(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "environment": {name: os.environ[name] for name in ENVIRONMENT if name in os.environ},
        # The machine's CPUs, and those the process could run on (pinned by
        # taskset or a cpuset where fewer): the threaded backends had these.
        "cpu_count": os.cpu_count(),
        "cpus": None if (cpus := usable_cpus()) is None else list(cpus),
    }


def _check_kernel(kernel: Any, platform: str, backends: Sequence[str] | None) -> tuple[str, ...]:
    if not all(
        hasattr(kernel, a) for a in ("name", "has_call", "has_benchmark_data", "available_backends")
    ):
        raise TypeError(
            "`kernel` must be an xla_custom_kernel.XLACustomKernel with a call function and "
            f"benchmark data, got {type(kernel)!r}"
        )
    name = kernel.name
    if not kernel.has_call:
        raise ValueError(
            f"kernel '{name}' has no call function to benchmark: register one with "
            "`@kernel.def_call`"
        )
    if not kernel.has_benchmark_data:
        raise ValueError(
            f"kernel '{name}' has no benchmark data: register a function returning "
            "BenchmarkConfig cases with `@kernel.def_benchmark_data`"
        )
    available = tuple(kernel.available_backends(platform))
    if not available:
        raise ValueError(f"kernel '{name}' has no backend for platform '{platform}'")
    if backends is None:
        return available
    if isinstance(backends, str) or not isinstance(backends, Sequence):
        raise TypeError(f"`backends` must be None or a list of backend names, got {backends!r}")
    if not backends:
        raise ValueError(
            f"`backends` must name at least one backend (None: all of them); available: "
            f"{', '.join(map(repr, available))}"
        )
    for b in backends:
        if b not in available and b != AUTO:
            raise ValueError(
                f"`backends` entry {b!r} is not a backend of kernel '{name}' on platform "
                f"'{platform}'; available: {', '.join(map(repr, available))}"
            )
    return tuple(dict.fromkeys(backends))


_CONFIG_FIELDS = ("name", "args", "kernel_kwargs", "data_kwargs")


def _cases(kernel: Any, platform: str) -> list[BenchmarkConfig]:
    cases = list(kernel.benchmark_data(platform=platform))
    if not cases:
        raise ValueError(f"the benchmark data of kernel '{kernel.name}' has no cases")
    names = set()
    for i, cfg in enumerate(cases):
        if not isinstance(cfg, BenchmarkConfig):
            if not all(hasattr(cfg, field) for field in _CONFIG_FIELDS):
                raise TypeError(
                    f"the benchmark data of kernel '{kernel.name}' must be BenchmarkConfig "
                    f"objects (or objects with the fields {', '.join(_CONFIG_FIELDS)}), "
                    f"got {type(cfg)!r} at position {i}"
                )
            # Another library's config type of the same shape (the seed's own,
            # say): its fields are checked as ours are.
            cfg = cases[i] = BenchmarkConfig(**{f: getattr(cfg, f) for f in _CONFIG_FIELDS})
        if cfg.name in names:
            raise ValueError(
                f"the benchmark data of kernel '{kernel.name}' has two cases named '{cfg.name}'"
            )
        names.add(cfg.name)
    return cases


def benchmark_kernel(
    kernel: Any,
    *,
    platform: str | None = None,
    n_warmup: int = 5,
    n_runs: int = 20,
    n_batch_per_run: int = 1,
    compare_results: bool = True,
    rtol: float = 1e-3,
    atol: float = 1e-3,
    verbose: bool = False,
    catch_errors: bool = True,
    backends: Sequence[str] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    autotune: bool = False,
    measure_in_program: bool = True,
    seconds_per_run: float = SECONDS_PER_RUN,
) -> BenchmarkResult:
    """Time every benchmark case of ``kernel`` on every backend of ``platform``.

    The cases come from the function registered with ``def_benchmark_data``;
    each backend runs each case as ``jax.jit(partial(kernel.call, backend=b,
    **case.kernel_kwargs))(*case.args)``. Every backend of a case is first
    compiled, warmed up and its result checked; then the dispatch runs of all
    of them are timed interleaved, round by round in a shuffled order, so that
    each is timed under the same conditions (``"auto"`` too). Once every case
    is done, the in-program rounds of all of them run in passes, a few rounds
    of each case per pass, so that a slow second of the machine falls on a
    few rounds of many cases rather than on every round of one.
    ``XLACustomKernel.benchmark`` calls this.

    Args:
        kernel: an ``XLACustomKernel``.
        platform: ``"cpu"``, ``"gpu"`` or ``"tpu"``; None: that of JAX's default backend.
        n_warmup: untimed runs of each backend first; at least one runs
            (it compiles, and its output is the one compared).
        n_runs, n_batch_per_run: timed dispatch runs, and calls per run
            (each timed run follows an untimed call of one, as a call in a
            loop follows the one before it).
        compare_results: check every backend's outputs against the reference
            backend's (the platform's default backend when it ran, else the
            first that ran) within ``rtol``/``atol``; a backend that disagrees
            is recorded with ``success=False`` and why, its times kept.
        rtol, atol: tolerances of the comparison (``kernel_check.first_difference``:
            NaNs equal; integer and bool outputs compared exactly).
        verbose: print one line per backend and case as they finish.
        catch_errors: record a backend that raises (or disagrees) and go on;
            if False, raise its exception (``ResultMismatchError`` for a
            disagreement), with a note naming the backend and case.
        backends: the backends to run, default all of the platform's.
        progress: called as ``progress(done, total, description)`` before
            each step and once at the end (``done == total``).
        autotune: also run each case with ``backend="auto"`` (recorded as
            backend ``"auto"``), after the named backends, where the platform
            has more than one available backend: the autotuner
            (``kernel_bench.autotune``) picks a backend per call signature,
            measuring it the first time.
        measure_in_program: also time every backend that ran inside one
            compiled program (a chain of calls in one ``jit``, as the autotuner
            measures), ``n_runs`` rounds interleaved with a small reference
            operation whose spread is recorded as the machine's noise, split
            over ``_program.PASSES`` passes over the cases, each pass
            throwing a warm-up round away.
        seconds_per_run: how long each in-program run lasts (the calls chained
            in it are chosen to fill it); by default the autotuner's, so that
            the two time the same chains. ``"auto"`` chains as many calls as
            the backend it picked.

    Returns:
        A ``BenchmarkResult`` with one record per case and backend, labelled
        ``"<kernel name>/<case name>"``.

    Raises:
        TypeError, ValueError: an argument of the wrong type or value (an
            unknown platform or backend, a count or tolerance out of range, a
            kernel without a call function, benchmark data or backends); each
            message names the argument.
        RuntimeError: ``platform`` is not available to JAX.
    """
    if platform is None:
        platform = default_platform()
    if not isinstance(platform, str):
        raise TypeError(
            f"`platform` must be None or one of {', '.join(map(repr, BACKEND_PLATFORMS))}, "
            f"got {platform!r}"
        )
    if platform not in BACKEND_PLATFORMS:
        raise ValueError(
            f"`platform` must be None or one of {', '.join(map(repr, BACKEND_PLATFORMS))}, got {platform!r}"
        )
    check_count("n_warmup", n_warmup, 0)
    check_count("n_runs", n_runs, 1)
    check_count("n_batch_per_run", n_batch_per_run, 1)
    for name, value in (("rtol", rtol), ("atol", atol)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"`{name}` must be a non-negative number, got {value!r}")
        if not value >= 0:
            raise ValueError(f"`{name}` must be a non-negative number, got {value!r}")
    for name, flag in (
        ("compare_results", compare_results),
        ("verbose", verbose),
        ("catch_errors", catch_errors),
        ("autotune", autotune),
        ("measure_in_program", measure_in_program),
    ):
        if not isinstance(flag, bool):
            raise TypeError(f"`{name}` must be a bool, got {flag!r}")
    if progress is not None and not callable(progress):
        raise TypeError(
            f"`progress` must be None or a callable progress(done, total, description), "
            f"got {progress!r}"
        )
    if isinstance(seconds_per_run, bool) or not isinstance(seconds_per_run, numbers.Real):
        raise TypeError(f"`seconds_per_run` must be a number of seconds, got {seconds_per_run!r}")
    if not seconds_per_run > 0:
        raise ValueError(f"`seconds_per_run` must be positive, got {seconds_per_run!r}")
    chosen = _check_kernel(kernel, platform, backends)
    try:
        device = jax.devices(platform)[0]
    except RuntimeError as exc:
        raise RuntimeError(
            f"platform '{platform}' is not available to JAX (it has "
            f"{', '.join(sorted({d.platform for d in jax.devices()}))}); pick another "
            "`platform`, or install the jaxlib plugin for it"
        ) from exc
    default = _fixed_default(kernel, platform)
    # The reference runs first, so every other backend is compared as it finishes.
    if default in chosen:
        chosen = (default, *(b for b in chosen if b != default))
    if autotune and len(kernel.available_backends(platform)) > 1:
        chosen = (*chosen, AUTO)

    cases = _cases(kernel, platform)
    deferred = waiting_list()
    here = measure_in_program and deferred is None
    total = len(cases) * len(chosen) + here
    waiting: list[InProgram] = []
    other_load: float | None = None
    records: list[BenchmarkRecord] = []
    step = 0
    for cfg in cases:
        label = f"{kernel.name}/{cfg.name}"
        args = jax.device_put(cfg.args, device)
        reference: tuple[str, Any] | None = None
        first = len(records)
        runs: dict[str, Any] = {}
        # Each backend is compiled, warmed up and checked first; then the
        # dispatch runs of all of them are timed together, interleaved, so that
        # every backend (and "auto", whose decision is made while it warms up)
        # is timed under the same conditions, not one after the other.
        warmed: list[tuple[str, BenchmarkRecord | None, dict[str, Any] | None]] = []
        for backend in chosen:
            if progress is not None:
                progress(step, total, f"{label} {backend}")
            step += 1
            failed, output, run, decision = _warm_one(
                kernel, cfg, args, backend, label, platform, n_warmup, n_batch_per_run, catch_errors
            )
            problem = None
            if compare_results and output is not None:
                if reference is None:
                    reference = (backend, output)
                else:
                    problem = _mismatch(reference[1], output, rtol, atol)
                    if problem is not None:
                        problem = f"result differs from backend '{reference[0]}': {problem}"
                        if not catch_errors:
                            raise ResultMismatchError(
                                f"backend '{backend}' of kernel '{kernel.name}' on case "
                                f"'{cfg.name}': {problem}"
                            )
            warmed.append((backend, failed, decision))
            if run is not None:
                runs[backend] = (run, problem)
        timings, errors = dispatch_times(
            {b: run for b, (run, _) in runs.items()}, args, n_batch_per_run, n_runs
        )
        for backend, failed, decision in warmed:
            if failed is None:
                common = _common(backend, label, platform, cfg)
                if backend in errors:
                    error = errors[backend]
                    if not catch_errors:
                        error.add_note(_note(backend, kernel, cfg))
                        raise error
                    failed = _error_record(common, error)
                    del runs[backend]
                else:
                    failed = _timed_record(common, timings[backend], decision)
                    if runs[backend][1] is not None:
                        failed = failed_record(failed, runs[backend][1])
                    runs[backend] = runs[backend][0]
            records.append(failed)
            if verbose:
                print(verbose_line(failed))
        if measure_in_program:
            waiting.append(InProgram(runs, args, tuple(records[first:])))
    if deferred is not None:
        deferred += waiting
    elif measure_in_program:
        if progress is not None:
            progress(step, total, f"{kernel.name} in program")
        meter = OtherLoad()
        measured = program_times(waiting, n_runs=n_runs, seconds=seconds_per_run)
        other_load = meter.share()
        records = with_measured(records, waiting, measured)
    if progress is not None:
        progress(total, total, "done")
    return BenchmarkResult(records, metadata={**_metadata(platform), "other_load": other_load})


def _fixed_default(kernel: Any, platform: str) -> str | None:
    # The default backend by name, also where the platform's default is "auto".
    fixed = getattr(kernel, "fixed_default", None)
    return fixed(platform) if fixed is not None else kernel.get_default(platform)


def _common(backend: str, label: str, platform: str, cfg: BenchmarkConfig) -> dict[str, Any]:
    return {
        "platform": platform,
        "backend": backend,
        "label": label,
        "kernel_kwargs": cfg.kernel_kwargs,
        "data_kwargs": cfg.data_kwargs,
    }


def _note(backend: str, kernel: Any, cfg: BenchmarkConfig) -> str:
    return f"while benchmarking backend '{backend}' of kernel '{kernel.name}' on case '{cfg.name}'"


def _error_record(common: dict[str, Any], exc: BaseException) -> BenchmarkRecord:
    return BenchmarkRecord(
        **common,
        mean_ms=None,
        std_ms=None,
        min_ms=None,
        throughput=None,
        success=False,
        error=_describe(exc),
    )


def _timed_record(
    common: dict[str, Any], timing: Timing, decision: dict[str, Any] | None
) -> BenchmarkRecord:
    mean, spread = timing.mean_ms, timing.spread
    return BenchmarkRecord(
        **common,
        mean_ms=mean,
        std_ms=timing.std_ms,
        min_ms=timing.min_ms,
        throughput=1e3 / mean if mean > 0 else None,
        success=True,
        median_ms=spread.median,
        q25_ms=spread.q25,
        q75_ms=spread.q75,
        autotune=decision,
    )


def _warm_one(
    kernel: Any,
    cfg: BenchmarkConfig,
    args: tuple[Any, ...],
    backend: str,
    label: str,
    platform: str,
    n_warmup: int,
    n_batch_per_run: int,
    catch_errors: bool,
) -> tuple[BenchmarkRecord | None, Any, Any, dict[str, Any] | None]:
    """Compile and warm up one backend on one case: ``n_warmup`` untimed runs
    (at least one, which compiles and gives the result). Returns the record of
    a backend that failed (else None), the output, the program (made by
    ``chained``) and the autotuner's decision behind backend "auto"."""
    # One compiled program serves both measurements: `run(count, *args)` chains
    # `count` calls (a run-time value), so a dispatch is `run(n_batch_per_run)`
    # and the in-program rounds reuse it with longer chains, compiling nothing new.
    run = chained(functools.partial(kernel.call, backend=backend, **cfg.kernel_kwargs))
    count = jax.numpy.asarray(n_batch_per_run, dtype=jax.numpy.int32)
    try:
        watch: contextlib.AbstractContextManager[list[Any]] = (
            recording() if backend == AUTO else contextlib.nullcontext([])
        )
        with watch as found:
            for _ in range(max(1, n_warmup)):
                output = jax.block_until_ready(run(count, *args))
        return None, jax.device_get(output), run, decision_data(found, kernel.name)
    except Exception as exc:
        if not catch_errors:
            exc.add_note(_note(backend, kernel, cfg))
            raise
        return _error_record(_common(backend, label, platform, cfg), exc), None, None, None
