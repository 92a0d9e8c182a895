"""The suite and ``kernel-bench run``: benchmark kernels, then report.

The report states its measurement model: the verdict (the fastest backend,
the speed-ups) comes from the median time per call inside a compiled program
(a chain of calls in one ``jit``, what backend ``"auto"`` optimises); the
lone-dispatch times are shown beside it; the machine's noise (a reference op
timed in the same rounds, and whether its slow runs were the whole machine's:
``_stretches``) and the rounds are stated; and every case where
``auto`` is slower than the fastest fixed backend beyond the noise is listed
with the reason (``_consistency``).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import pathlib
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from ._awake import keep_cpus_awake
from ._cli_common import SUITE_MODULE, resolve
from ._consistency import MIN_TOLERANCE, NOISY, check_consistency, forget_stale
from ._console import ProgressBar, print_table
from ._kernel import AUTO, benchmark_kernel, default_platform
from ._load import OtherLoad
from ._program import PASSES, REFERENCE_OP, deferred_in_program, program_times, with_measured
from ._record import BenchmarkRecord
from ._result import FILE_FORMATS, BenchmarkResult
from ._stretches import describe as describe_stretches
from ._stretches import slow_stretches
from ._timing import SECONDS_PER_RUN

__all__ = ["DEFAULT_STEM", "PROGRAM_SECONDS", "SCALES", "run_suite", "run_targets"]

#: Run sizes: (n_warmup, n_runs) per scale; the bundled suite also sizes its data by it.
SCALES: dict[str, tuple[int, int]] = {"quick": (1, 10), "default": (3, 15), "full": (5, 30)}
#: Seconds each in-program run lasts, per scale: long enough that launching
#: the program from Python (10-30 us) is lost in it, short enough that on a
#: shared machine most runs end before the scheduler hands the core to
#: another job (a longer run is interrupted more often: its rounds spread);
#: at every scale the autotuner's run length (``_timing.SECONDS_PER_RUN``), so
#: that the verdict and the autotuner time the same chains.
PROGRAM_SECONDS: dict[str, float] = dict.fromkeys(("quick", "default", "full"), SECONDS_PER_RUN)
DEFAULT_STEM = "kernel-bench-results"
REFERENCE_BACKEND = "jax"
MEASUREMENT_MODEL = (
    "time per call in program: the median over rounds of a chain of calls inside one compiled "
    "program (jit), as the autotuner measures and what backend auto optimises; the verdict "
    "(fastest backend, speed-ups) uses it. dispatch: the median of one jitted call per run, "
    "dispatch overhead included."
)


def _sizes(args: argparse.Namespace) -> tuple[int, int]:
    n_warmup, n_runs = SCALES[args.scale]
    n_warmup = n_warmup if args.n_warmup is None else args.n_warmup
    n_runs = n_runs if args.n_runs is None else args.n_runs
    return n_warmup, n_runs


def _skip_reason(kernel: Any, platform: str, backends: Sequence[str] | None) -> str | None:
    if not kernel.has_benchmark_data:
        return "no benchmark data"
    available = kernel.available_backends(platform)
    if not available:
        return f"no backend for platform '{platform}'"
    if backends is not None and not set(backends) & set(available):
        return f"none of the backends {', '.join(backends)} (it has {', '.join(available)})"
    return None


def _benchmark_all(kernels: Iterable[Any], args: argparse.Namespace) -> BenchmarkResult:
    # Idle CPUs kept awake (where permitted) from the first compile to the
    # last round: every timing, the autotuner's included, sees CPUs that wake
    # at once (``_awake``).
    with keep_cpus_awake(args.keep_cpus_awake is not False) as awake:
        result = _benchmark_runnable(kernels, args)
        # Inside the block: a decision read from the file of decisions made
        # with idle CPUs kept awake is forgotten in that file.
        _check_consistency(result)
    result.metadata["cpu_idle"] = awake.describe()
    return result


def _benchmark_runnable(kernels: Iterable[Any], args: argparse.Namespace) -> BenchmarkResult:
    platform = args.platform or default_platform()
    n_warmup, n_runs = _sizes(args)
    show = sys.stderr.isatty() if args.progress is None else args.progress
    bar = ProgressBar() if show else None
    runnable = []
    for k in dict.fromkeys(kernels):
        reason = _skip_reason(k, platform, args.backends)
        if reason is None:
            runnable.append(k)
        else:
            print(f"kernel-bench: skipping '{k.name}': {reason}", file=sys.stderr)
    records: list[BenchmarkRecord] = []
    metadata: dict[str, Any] = {}
    # Every kernel's cases first (compiled, checked, dispatch timed), then the
    # in-program rounds of all of them together, in passes over the cases.
    with deferred_in_program() as waiting:
        for i, k in enumerate(runnable):
            if bar is not None:
                bar.prefix = f"{i + 1}/{len(runnable)} {k.name} "
            chosen = None
            if args.backends is not None:
                chosen = [b for b in args.backends if b in k.available_backends(platform)]
            result = benchmark_kernel(
                k,
                platform=platform,
                n_warmup=n_warmup,
                n_runs=n_runs,
                n_batch_per_run=args.n_batch,
                verbose=args.verbose,
                backends=chosen,
                progress=bar,
                autotune=bool(args.autotune),
                seconds_per_run=PROGRAM_SECONDS[args.scale],
            )
            records += result.records
            metadata = result.metadata
    if bar is not None:
        bar.prefix = ""
    meter = OtherLoad()
    trace: list[tuple[float, int, str, float]] = []
    measured = program_times(
        waiting, n_runs=n_runs, seconds=PROGRAM_SECONDS[args.scale], progress=bar, trace=trace
    )
    other_load = meter.share()
    stretches = slow_stretches(trace, REFERENCE_OP)
    records = with_measured(records, waiting, measured)
    metadata.update(
        scale=args.scale,
        n_warmup=n_warmup,
        n_runs=n_runs,
        n_batch_per_run=args.n_batch,
        seconds_per_program_run=PROGRAM_SECONDS[args.scale],
        passes=PASSES,
        measurement=MEASUREMENT_MODEL,
        other_load=other_load,
    )
    if stretches is not None:
        metadata["slow_stretches"] = dataclasses.asdict(stretches)
    return BenchmarkResult(records, metadata=metadata)


def _report(
    result: BenchmarkResult,
    speedup_vs: str | None,
    json_path: pathlib.Path | None,
    png_path: pathlib.Path | None,
) -> int:
    if not result.records:
        print("kernel-bench: nothing was benchmarked", file=sys.stderr)
        return 1
    if speedup_vs not in {r.backend for r in result.records}:
        speedup_vs = None
    program = any(r.program_median_ms is not None for r in result.records)
    if program:
        rounds = max(r.rounds or 0 for r in result.records)
        print(
            f"time per call inside a compiled program (median ms over {rounds} rounds of a "
            'chain of calls in one jit; what "auto" optimises; the verdict):'
        )
        result.print(compare_by="backend", speedup_vs=speedup_vs, measure="program")
        print()
    runs = result.metadata.get("n_runs", "the")
    print(f"time per call as a lone dispatch (median ms over {runs} runs of one jitted call):")
    result.print(compare_by="backend", measure="dispatch")
    if program:
        _print_noise(result)
    header, rows = _choices(result)
    if rows:
        print('\nautotuned backends (what "auto" ran, and the autotuner\'s own figures):')
        print_table(header, rows, [False] * len(header))
    if program:
        _print_consistency(result)
    for path in (json_path, png_path):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
    if json_path is not None:
        print(f"\nrecords: {result.save(json_path)}")
    if png_path is not None:
        print(f"plot: {result.plot(png_path)}")
    failed = [r for r in result.records if not r.success]
    if failed:
        print(f"kernel-bench: {len(failed)} of {len(result.records)} runs failed", file=sys.stderr)
        return 1
    return 0


def _print_noise(result: BenchmarkResult) -> None:
    noise = [r.noise for r in result.records if r.noise is not None]
    if not noise:
        return
    busy = sum(n > NOISY for n in noise)
    load = result.metadata.get("other_load")
    idle = result.metadata.get("cpu_idle")
    stretches = describe_stretches(result.metadata.get("slow_stretches"))
    pinned = _pinned(result.metadata.get("cpus"), result.metadata.get("cpu_count"))
    print(
        f"\nmachine noise: a reference op timed in the same rounds spread (IQR/median) "
        f"{min(noise):.1%} to {max(noise):.1%} over the cases"
        + (f"; above {NOISY:.0%} (noisy) in {busy} of {len(noise)}" if busy else "")
        + ("" if load is None else f"; other processes used {load:.1%} of the CPUs meanwhile")
        + ("" if idle is None else f"; {idle}")
        + ("" if stretches is None else f"; {stretches}")
        + ("" if pinned is None else f"; {pinned}")
    )


def _pinned(cpus: Any, cpu_count: Any) -> str | None:
    # A clause for a run whose process could use fewer CPUs than the machine
    # has (taskset, a cpuset): its threaded backends had only those.
    if not isinstance(cpus, list) or not isinstance(cpu_count, int) or len(cpus) >= cpu_count:
        return None
    named = ", ".join(str(c) for c in cpus)
    return f"run on CPU{'s' if len(cpus) > 1 else ''} {named} of the machine's {cpu_count} (the process's affinity)"


def _check_consistency(result: BenchmarkResult) -> None:
    # Every case where auto ran slower than the fastest backend, with its
    # reason, into the metadata; each decision from disk the run contradicts
    # is forgotten (``forget_stale``).
    found, compared = check_consistency(result.records)
    result.metadata["consistency"] = {
        "compared": compared,
        "disagreements": [d.to_dict() for d in forget_stale(found)],
    }


def _print_consistency(result: BenchmarkResult) -> None:
    consistency = result.metadata.get("consistency") or {}
    compared, found = consistency.get("compared", 0), consistency.get("disagreements", [])
    if not compared:
        return
    print(
        f'\nconsistency: "auto" against the fastest fixed backend, in program, in {compared} '
        f"cases: {compared - len(found)} as fast within the noise (medians within "
        f"{MIN_TOLERANCE:.0%}, or interquartile ranges overlapping)"
        + ("." if not found else f"; slower in {len(found)}:")
    )
    if found:
        rows = [
            [
                d["label"],
                f"{d['auto_ms']:.4g}",
                f"{d['best']} {d['best_ms']:.4g}",
                f"{d['ratio']:.2f}x",
                "-" if d["noise"] is None else f"{d['noise']:.0%}",
                d["reason"],
            ]
            for d in found
        ]
        header = ["case", "auto ms", "fastest ms", "auto/fastest", "machine noise", "why"]
        print_table(header, rows, [False, True, False, True, True, False])


def _choices(result: BenchmarkResult) -> tuple[list[str], list[list[str]]]:
    """The autotuned choice per operation and call signature: header and rows."""
    rows, seen = [], set()
    for r in result.records:
        d = r.autotune
        if d is None or (r.label.split("/")[0], d["signature"]) in seen:
            continue
        seen.add((r.label.split("/")[0], d["signature"]))
        margin, noise, busy, load = (d.get(k) for k in ("margin", "noise", "busy", "load"))
        rows.append(
            [
                r.label.split("/")[0],
                d["signature"],
                d["backend"],
                d["source"],
                f"{margin:.2f}x over {d.get('runner_up')}" if margin else "-",
                "-" if noise is None else f"{noise:.1%}",
                ("-" if busy is None else ("yes" if busy else "no"))
                + ("" if load is None else f" ({load:.0%})"),
                ", ".join(d.get("left_out") or ()) or "-",
            ]
        )
    header = ["operation", "call signature", "auto picks", "decided by", "margin", "noise"]
    return [*header, "busy", "left out"], rows


def _check_output(parser: argparse.ArgumentParser, output: pathlib.Path | None) -> None:
    # Before anything is timed: a file that cannot be written would lose the run.
    if output is None:
        return
    if output.suffix.lower() not in FILE_FORMATS:
        parser.error(f"--output must end in {' or '.join(FILE_FORMATS)}, got '{output}'")
    if output.parent.exists() and not output.parent.is_dir():
        parser.error(f"--output {output}: {output.parent} is not a folder")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        parser.error(f"--output {output}: cannot make its folder ({exc.strerror or exc})")
    if output.is_dir() or not os.access(output.parent, os.W_OK):
        parser.error(f"--output {output}: cannot write a file there")


def _check_backends(parser: argparse.ArgumentParser, kernels: Sequence[Any], args: Any) -> None:
    # A backend that none of the kernels has is a typo, not a filter.
    if args.backends is None:
        return
    platform = args.platform or default_platform()
    known = {b for k in kernels for b in k.available_backends(platform)} | {AUTO}
    unknown = [b for b in args.backends if b not in known]
    if unknown:
        parser.error(
            f"--backends: {', '.join(map(repr, unknown))} is no backend of the kernels on "
            f"{platform}; they have {', '.join(sorted(known))}"
        )


def run_suite(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    _check_output(parser, args.output)
    suite = importlib.import_module(SUITE_MODULE)
    suite.set_scale(args.scale)
    if args.autotune is None:
        args.autotune = True
    _check_backends(parser, suite.example_kernels(), args)
    result = _benchmark_all(suite.example_kernels(), args)
    json_path = args.output or pathlib.Path(f"{DEFAULT_STEM}.json")
    png_path = None if args.no_plot else json_path.with_suffix(".png")
    status = _report(result, REFERENCE_BACKEND, json_path, png_path)
    _report_sharded(suite.example_kernels(), args)
    return status


def run_targets(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    _check_output(parser, args.output)
    if args.plot is not None and args.plot.suffix.lower() != ".png":
        parser.error(f"--plot must end in .png, got '{args.plot}'")
    kernels = [k for t in args.targets for k in resolve(parser, t, args.tags)]
    if not kernels:
        parser.error(
            "no kernel matches "
            + " ".join(args.targets)
            + (f" with tags {', '.join(args.tags)}" if args.tags else "")
        )
    _check_backends(parser, kernels, args)
    result = _benchmark_all(kernels, args)
    if args.speedup_vs is not None and args.speedup_vs not in {r.backend for r in result.records}:
        parser.error(f"--speedup-vs {args.speedup_vs}: no kernel ran a backend of that name")
    # The plot: where --plot says, else beside --output's records (as --help says).
    png_path = args.plot
    if png_path is None and args.output is not None and not args.no_plot:
        png_path = args.output.with_suffix(".png")
    status = _report(result, args.speedup_vs, args.output, png_path)
    _report_sharded(kernels, args)
    return status


def _report_sharded(kernels: Iterable[Any], args: argparse.Namespace) -> None:
    if not args.devices:
        return
    n_warmup, n_runs = _sizes(args)
    from ._sharded import HEADER as SHARDED_HEADER
    from ._sharded import run_sharded

    runs, without = [], []
    for k in dict.fromkeys(kernels):
        if "cpu" not in k.defaults:
            continue
        if k.sharding_rule is None:
            without.append(k.name)
            continue
        available = k.available_backends("cpu")
        backends = [b for b in (args.backends or [k.fixed_default("cpu")]) if b in available]
        for cfg in k.benchmark_data(platform="cpu"):
            for backend in backends:
                runs.append(
                    run_sharded(k, cfg, backend, args.devices, n_warmup=n_warmup, n_runs=n_runs)
                )
    print(f"\nsharded over {args.devices} CPU devices (kernels with a sharding rule):")
    print_table(SHARDED_HEADER, [r.row() for r in runs], [False, False, True, True, False, False])
    if without:
        print(f"no sharding rule (replicated under a sharded jit): {', '.join(without)}")
