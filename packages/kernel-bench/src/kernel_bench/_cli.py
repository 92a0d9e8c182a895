"""The ``kernel-bench`` command: the bundled suite, a user's kernels, listing, comparing runs."""

from __future__ import annotations

import argparse
import importlib
import pathlib
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from . import autotune
from ._autotune_cli import add_autotune_command, run_autotune
from ._check_cli import add_check_command, run_check
from ._cli_common import SUITE_MODULE, LazyHelpParser, import_module, resolve
from ._compare import compare
from ._console import print_table
from ._kernel import PLATFORMS, benchmark_kernel, default_platform
from ._progress import ProgressBar
from ._result import FILE_FORMATS, BenchmarkResult
from ._sharded import HEADER as SHARDED_HEADER
from ._sharded import run_sharded

__all__ = ["SCALES", "main"]

#: Run sizes: (n_warmup, n_runs) per scale; the bundled suite also sizes its data by it.
SCALES: dict[str, tuple[int, int]] = {"quick": (1, 5), "default": (3, 10), "full": (5, 30)}
DEFAULT_STEM = "kernel-bench-results"
REFERENCE_BACKEND = "jax"
_SUITE_MODULE = SUITE_MODULE

_DESCRIPTION = """\
Time every backend of XLACustomKernel operations and see which wins.

With no command, runs the bundled example suite (CSR matrix-vector and
matrix-matrix products, a LIF neuron step, an exponential trace, an
elementwise op), each on every backend registered for the platform (numba, the
pure-JAX reference, warp where installed...) and on "auto", the backend the
autotuner picks per operation and shape; prints a table with the speedup
against the reference and the autotuned choices, and writes
kernel-bench-results.json and kernel-bench-results.png."""

_EPILOG = """\
examples:
  kernel-bench                       the bundled suite (--quick: smaller, --full: larger)
  kernel-bench run mypkg.ops:csrmv   benchmark one of your kernels
  kernel-bench run mypkg.ops --tags sparse --output new.json
  kernel-bench list mypkg.ops        kernels registered by a module, with tags and backends
  kernel-bench compare old.json new.json
  kernel-bench autotune run csr_matvec   decide "auto" for each benchmark case, and explain
  kernel-bench autotune show             the decisions kept on disk
  kernel-bench autotune clear            forget them"""


def _timing_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    size = parent.add_mutually_exclusive_group()
    size.add_argument(
        "--quick",
        dest="scale",
        action="store_const",
        const="quick",
        help="a short run: small data (bundled suite) and few timed runs",
    )
    size.add_argument(
        "--full",
        dest="scale",
        action="store_const",
        const="full",
        help="a long run: the largest data (bundled suite) and more timed runs",
    )
    parent.set_defaults(scale="default")
    parent.add_argument(
        "--platform",
        choices=PLATFORMS,
        default=None,
        help="where to run the kernels (default: JAX's default device)",
    )
    parent.add_argument(
        "--backends",
        nargs="+",
        metavar="B",
        default=None,
        help="run only these backends (default: every backend of the platform)",
    )
    parent.add_argument("--n-runs", type=int, metavar="N", help="timed runs per backend and case")
    parent.add_argument("--n-warmup", type=int, metavar="N", help="untimed runs first")
    parent.add_argument(
        "--n-batch",
        type=int,
        metavar="N",
        default=1,
        help="calls per timed run, chained in one program (for very short calls)",
    )
    parent.add_argument(
        "--output",
        type=pathlib.Path,
        metavar="FILE",
        help=f"write the records to FILE ({' or '.join(FILE_FORMATS)}) and the plot beside it",
    )
    _switch(
        parent,
        "progress",
        "show a progress bar on standard error (default: when it is a terminal)",
    )
    parent.add_argument(
        "-v", "--verbose", action="store_true", help="print each backend's time as it finishes"
    )
    parent.add_argument(
        "--devices",
        type=int,
        metavar="N",
        default=None,
        help="also run each case of a kernel with a sharding rule under jit, sharded over a "
        "mesh of N CPU devices, and report the time and the elements each device computed",
    )
    _switch(
        parent,
        "autotune",
        'also run backend "auto" and show its choices (default for the bundled suite)',
    )
    return parent


def _switch(parser: argparse.ArgumentParser, name: str, help: str) -> None:
    """``--name`` and ``--no-name``, leaving ``args.name`` None when neither is given."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(f"--{name}", dest=name, action="store_true", default=None, help=help)
    group.add_argument(f"--no-{name}", dest=name, action="store_false")


def build_parser() -> argparse.ArgumentParser:
    timing = _timing_options()
    parser = LazyHelpParser(
        prog="kernel-bench",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        parents=[timing],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--output-dir",
        type=pathlib.Path,
        metavar="DIR",
        default=pathlib.Path(),
        help=f"where the suite writes {DEFAULT_STEM}.json and .png (default: here)",
    )
    parser.add_argument("--no-plot", action="store_true", help="write no PNG")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser(
        "run",
        parents=[timing],
        help="benchmark your own kernels",
        description="Benchmark XLACustomKernel operations: every case of their benchmark data "
        "on every backend of the platform.",
    )
    run.add_argument(
        "targets",
        nargs="+",
        metavar="MODULE[:ATTR]",
        help="a kernel (or list of kernels) as module:attribute, or a module: every kernel "
        "registered once it is imported",
    )
    run.add_argument("--tags", nargs="+", metavar="T", help="only kernels with any of these tags")
    run.add_argument(
        "--speedup-vs", metavar="B", help="add the speedup against backend B to the table"
    )
    run.add_argument("--plot", type=pathlib.Path, metavar="PNG", help="write the plot to PNG")

    listing = commands.add_parser(
        "list",
        help="show registered kernels with their tags and backends",
        description="Show the kernels registered once the modules are imported (default: the "
        "bundled examples), with their tags, backends per platform and whether they have "
        "benchmark data.",
    )
    listing.add_argument("modules", nargs="*", metavar="MODULE", help="modules to import first")
    listing.add_argument(
        "--tags", nargs="+", metavar="T", help="only kernels with any of these tags"
    )

    comparing = commands.add_parser(
        "compare",
        help="show the change between two saved runs",
        description="Compare two result files (.json or .csv) case by case.",
    )
    comparing.add_argument("old", type=pathlib.Path, metavar="OLD")
    comparing.add_argument("new", type=pathlib.Path, metavar="NEW")
    add_check_command(commands)

    add_autotune_command(commands, timing)
    return parser


def _skip_reason(kernel: Any, platform: str, backends: Sequence[str] | None) -> str | None:
    if not kernel.has_benchmark_data:
        return "no benchmark data"
    available = kernel.available_backends(platform)
    if not available:
        return f"no backend for platform '{platform}'"
    if backends is not None and not set(backends) & set(available):
        return f"none of the backends {', '.join(backends)} (it has {', '.join(available)})"
    return None


def _benchmark_all(
    kernels: Iterable[Any], args: argparse.Namespace
) -> tuple[BenchmarkResult, list[autotune.Decision]]:
    platform = args.platform or default_platform()
    n_warmup, n_runs = SCALES[args.scale]
    n_warmup = n_warmup if args.n_warmup is None else args.n_warmup
    n_runs = n_runs if args.n_runs is None else args.n_runs
    show = sys.stderr.isatty() if args.progress is None else args.progress
    bar = ProgressBar() if show else None
    runnable = []
    for k in dict.fromkeys(kernels):
        reason = _skip_reason(k, platform, args.backends)
        if reason is None:
            runnable.append(k)
        else:
            print(f"kernel-bench: skipping '{k.name}': {reason}", file=sys.stderr)
    records, metadata = [], {}
    decisions: list[autotune.Decision] = []
    for i, k in enumerate(runnable):
        if bar is not None:
            bar.prefix = f"{i + 1}/{len(runnable)} {k.name} "
        chosen = None
        if args.backends is not None:
            chosen = [b for b in args.backends if b in k.available_backends(platform)]
        with autotune.recording() as found:
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
            )
        decisions.extend(found)
        records += result.records
        metadata = result.metadata
    metadata.update(
        scale=args.scale, n_warmup=n_warmup, n_runs=n_runs, n_batch_per_run=args.n_batch
    )
    return BenchmarkResult(records, metadata=metadata), decisions


def _report(
    result: BenchmarkResult,
    speedup_vs: str | None,
    json_path: pathlib.Path | None,
    png_path: pathlib.Path | None,
    decisions: Sequence[autotune.Decision] = (),
) -> int:
    if not result.records:
        print("kernel-bench: nothing was benchmarked", file=sys.stderr)
        return 1
    if speedup_vs not in {r.backend for r in result.records}:
        speedup_vs = None
    result.print(compare_by="backend", speedup_vs=speedup_vs)
    if decisions:
        print("\nautotuned backends:")
        header, rows = _choices(decisions)
        print_table(header, rows, [False] * len(header))
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


def _choices(decisions: Sequence[autotune.Decision]) -> tuple[list[str], list[list[str]]]:
    """The autotuned choice per operation and call signature: header and rows."""
    rows, seen = [], set()
    for d in decisions:
        if d.key in seen:
            continue
        seen.add(d.key)
        timed = {c.backend: c.us_per_call for c in d.candidates if c.us_per_call is not None}
        others = [b for b in timed if b != d.backend]
        runner_up = min(others, key=timed.__getitem__) if others else None
        margin = (
            f"{timed[runner_up] / timed[d.backend]:.2f}x faster than {runner_up}"
            if runner_up is not None and timed.get(d.backend)
            else ""
        )
        left_out = ", ".join(f"{c.backend} ({c.status})" for c in d.candidates if c.status != "ok")
        rows.append([d.op, d.signature, d.backend, d.source, margin, left_out or "-"])
    header = ["operation", "call signature", "auto picks", "decided by", "margin", "left out"]
    return header, rows


def _check_output(parser: argparse.ArgumentParser, output: pathlib.Path | None) -> None:
    if output is not None and output.suffix.lower() not in FILE_FORMATS:
        parser.error(f"--output must end in {' or '.join(FILE_FORMATS)}, got '{output}'")


def _run_suite(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    _check_output(parser, args.output)
    suite = importlib.import_module(_SUITE_MODULE)
    suite.set_scale(args.scale)
    if args.autotune is None:
        args.autotune = True
    result, decisions = _benchmark_all(suite.example_kernels(), args)
    json_path = args.output or args.output_dir / f"{DEFAULT_STEM}.json"
    png_path = None if args.no_plot else json_path.with_suffix(".png")
    status = _report(result, REFERENCE_BACKEND, json_path, png_path, decisions)
    _report_sharded(suite.example_kernels(), args)
    return status


def _run_targets(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
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
    result, decisions = _benchmark_all(kernels, args)
    if args.speedup_vs is not None and args.speedup_vs not in {r.backend for r in result.records}:
        parser.error(f"--speedup-vs {args.speedup_vs}: no kernel ran a backend of that name")
    status = _report(result, args.speedup_vs, args.output, args.plot, decisions)
    _report_sharded(kernels, args)
    return status


def _use_cpu_devices(parser: argparse.ArgumentParser, n: int) -> None:
    # The command is the program: before JAX starts its backends it may ask
    # for n CPU devices (as XLA_FLAGS=--xla_force_host_platform_device_count
    # would); where they run already, they must be enough.
    import jax

    if n < 1:
        parser.error(f"--devices must be at least 1, got {n}")
    try:
        jax.config.update("jax_num_cpu_devices", n)
    except (RuntimeError, AttributeError):
        pass
    have = len(jax.devices("cpu"))
    if have < n:
        parser.error(
            f"--devices {n}: JAX has {have} CPU devices; start the command with "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={n}"
        )


def _report_sharded(kernels: Iterable[Any], args: argparse.Namespace) -> None:
    if not args.devices:
        return
    n_warmup, n_runs = SCALES[args.scale]
    n_warmup = n_warmup if args.n_warmup is None else args.n_warmup
    n_runs = n_runs if args.n_runs is None else args.n_runs
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


def _list(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    for module in args.modules or [_SUITE_MODULE]:
        import_module(parser, module)
    from xla_custom_kernel import registered_kernels

    kernels = registered_kernels(tags=args.tags)
    if not kernels:
        print("no registered kernels" + (f" with tags {', '.join(args.tags)}" if args.tags else ""))
        return 0
    rows = []
    for name, k in sorted(kernels.items()):
        row = [name, ", ".join(k.tags) or "-"]
        for p in PLATFORMS:
            default = k.get_default(p)
            row.append(
                ", ".join(b + ("*" if b == default else "") for b in k.available_backends(p)) or "-"
            )
        row.append("yes" if k.has_benchmark_data else "no")
        rows.append(row)
    header = ["kernel", "tags", *PLATFORMS, "benchmark data"]
    print_table(header, rows, [False] * len(header))
    print("\n* default backend of the platform")
    return 0


def _compare(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    results = []
    for path in (args.old, args.new):
        try:
            results.append(BenchmarkResult.load(path))
        except (OSError, ValueError, TypeError) as exc:
            parser.error(f"cannot read '{path}': {exc}")
    print(compare(*results))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in ("n_runs", "n_batch"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if getattr(args, "n_warmup", None) is not None and args.n_warmup < 0:
        parser.error(f"--n-warmup must be at least 0, got {args.n_warmup}")
    if args.command in (None, "run", "autotune", "check"):
        _quiet_warp()
    if getattr(args, "devices", None) is not None:
        _use_cpu_devices(parser, args.devices)
    command = {
        None: _run_suite,
        "run": _run_targets,
        "list": _list,
        "compare": _compare,
        "check": run_check,
        "autotune": run_autotune,
    }
    return command[args.command](parser, args)


def _quiet_warp() -> None:
    """The command is the program here, so it may set Warp's logging: Warp would
    print its banner and a line per module it builds into the table's output.
    Only when benchmarks run, where Warp is installed and its level is still the
    default; never on import."""
    try:
        import warp
    except ImportError:
        return
    if warp.config.log_level == warp.LOG_INFO:
        warp.config.log_level = warp.LOG_WARNING


if __name__ == "__main__":
    sys.exit(main())
