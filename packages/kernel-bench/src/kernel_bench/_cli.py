"""The ``kernel-bench`` command: the bundled suite, a user's kernels, listing, comparing runs."""

from __future__ import annotations

import argparse
import pathlib
import sys
import warnings
from collections.abc import Sequence

from ._autotune_cli import add_autotune_command, run_autotune
from ._check_cli import add_check_command, run_check
from ._cli_common import SUITE_MODULE, LazyHelpParser, add_scale_and_platform, resolve
from ._config import BACKEND_PLATFORMS
from ._result import FILE_FORMATS

__all__ = ["main"]

# Nothing imported here at the top imports JAX: `kernel-bench --help` (and a
# usage error) answers at once; each command imports what it runs.
DEFAULT_STEM = "kernel-bench-results"

_DESCRIPTION = """\
Time every backend of XLACustomKernel operations and see which wins.

With no command, runs the bundled example suite (CSR matrix-vector and
matrix-matrix products, a LIF neuron step, an exponential trace, an
elementwise op), each on every backend registered for the platform (numba, the
pure-JAX reference, warp where installed...) and on "auto", the backend the
autotuner picks per operation and shape; prints a table with the speedup
against the reference and the autotuned choices, and writes
kernel-bench-results.json and kernel-bench-results.png (--output moves them).

Time per call is measured two ways: inside a compiled program (a chain of
calls in one jit, as the autotuner measures: the verdict and the speed-ups use
its median) and as a lone dispatch (one jitted call per run). Medians, with
the interquartile range and the least beside them; never the mean."""

_EPILOG = """\
examples:
  kernel-bench                       the bundled suite (--quick: smaller, --full: larger)
  kernel-bench run mypkg.ops:csrmv   benchmark one of your kernels
  kernel-bench run mypkg.ops --tags sparse --output new.json
  kernel-bench list mypkg.ops        kernels registered by a module, with tags and backends
  kernel-bench --output runs/today.json   the suite's records (and plot) elsewhere
  kernel-bench compare old.json new.json  two files of --output: old (the baseline), new
  kernel-bench autotune run csr_matvec   decide "auto" for each benchmark case, and explain
  kernel-bench autotune show             the decisions kept on disk
  kernel-bench autotune clear            forget them"""


def _timing_options(defaults: bool = True) -> LazyHelpParser:
    """The options of a run, for the command (``defaults``) and for ``run``, whose
    copy sets only what it is given: the command's values, given before ``run``
    (``kernel-bench --n-runs 5 run m``), are kept, and given after it they win."""
    # The subcommands' parsers are LazyHelpParsers, and so are the parents they take.
    parent = LazyHelpParser(
        add_help=False, argument_default=None if defaults else argparse.SUPPRESS
    )
    add_scale_and_platform(
        parent,
        quick="a short run: small data (bundled suite) and few timed runs",
        full="a long run: the largest data (bundled suite) and more timed runs",
        platform="where to run the kernels (default: JAX's default device)",
        defaults=defaults,
    )
    parent.add_argument(
        "--backends",
        nargs="+",
        metavar="B",
        help="run only these backends (default: every backend of the platform)",
    )
    parent.add_argument("--n-runs", type=int, metavar="N", help="timed runs per backend and case")
    parent.add_argument("--n-warmup", type=int, metavar="N", help="untimed runs first")
    parent.add_argument(
        "--n-batch",
        type=int,
        metavar="N",
        default=1 if defaults else argparse.SUPPRESS,
        help="calls per timed run, chained in one program (for very short calls)",
    )
    parent.add_argument(
        "--output",
        type=pathlib.Path,
        metavar="FILE",
        help=f"write the records to FILE ({' or '.join(FILE_FORMATS)}) and the plot beside it "
        f"(the suite's default: {DEFAULT_STEM}.json here)",
    )
    _switch(
        parent,
        "progress",
        "show a progress bar on standard error (default: when it is a terminal)",
    )
    parent.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=False if defaults else argparse.SUPPRESS,
        help="print each backend's time as it finishes",
    )
    parent.add_argument(
        "--devices",
        type=int,
        metavar="N",
        help="also run each case of a kernel with a sharding rule under jit, sharded over a "
        "mesh of N CPU devices, and report the time and the elements each device computed",
    )
    _switch(
        parent,
        "keep-cpus-awake",
        "hold a CPU wake-up latency request of 0 us while timing, so that idle CPUs poll "
        "instead of halting and a woken thread runs at once at full speed (default where "
        "/dev/cpu_dma_latency is writable; the report says whether it was held)",
    )
    _switch(
        parent,
        "autotune",
        'also run backend "auto" and show its choices (default for the bundled suite)',
    )
    return parent


def _switch(parser: argparse.ArgumentParser, name: str, help: str) -> None:
    """``--name`` and ``--no-name``, leaving ``args.name`` (hyphens as underscores)
    None when neither is given (unset where the parser sets no defaults)."""
    dest = name.replace("-", "_")
    unset = None if parser.argument_default is None else argparse.SUPPRESS
    group = parser.add_mutually_exclusive_group()
    group.add_argument(f"--{name}", dest=dest, action="store_true", default=unset, help=help)
    group.add_argument(f"--no-{name}", dest=dest, action="store_false", default=unset)


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
        default=None,
        help=f"deprecated: use --output DIR/{DEFAULT_STEM}.json",
    )
    parser.add_argument("--no-plot", action="store_true", help="write no PNG")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser(
        "run",
        parents=[_timing_options(defaults=False)],
        help="benchmark your own kernels",
        description="Benchmark XLACustomKernel operations: every case of their benchmark data "
        "on every backend of the platform.",
    )
    run.add_argument(
        "targets",
        nargs="+",
        metavar="MODULE[:ATTR]",
        help="a kernel (or list of kernels) as module:attribute, or a module: the kernels "
        "its code creates and those it holds",
    )
    run.add_argument("--tags", nargs="+", metavar="T", help="only kernels with any of these tags")
    run.add_argument(
        "--speedup-vs", metavar="B", help="add the speedup against backend B to the table"
    )
    run.add_argument(
        "--plot",
        type=pathlib.Path,
        metavar="PNG",
        help="write the plot to PNG (default: beside --output's FILE)",
    )
    run.add_argument(
        "--no-plot", action="store_true", default=argparse.SUPPRESS, help="write no PNG"
    )

    listing = commands.add_parser(
        "list",
        help="show the kernels of modules with their tags and backends",
        description="Show the kernels of the modules (default: the bundled examples): those "
        "their code creates and those they hold, as for run, with their tags, backends per "
        "platform and whether they have benchmark data.",
    )
    listing.add_argument(
        "modules", nargs="*", metavar="MODULE", help="modules whose kernels to show"
    )
    listing.add_argument(
        "--tags", nargs="+", metavar="T", help="only kernels with any of these tags"
    )

    comparing = commands.add_parser(
        "compare",
        help="show the change between two saved runs",
        description="Compare two result files case by case: each written by `kernel-bench "
        "--output FILE` or `kernel-bench run ... --output FILE` (.json or .csv). The time "
        "compared is the median in program where both files have it, else the median "
        "dispatch, else (files of older versions) the mean.",
    )
    comparing.add_argument(
        "old", type=pathlib.Path, metavar="OLD", help="the baseline: the earlier run's file"
    )
    comparing.add_argument(
        "new", type=pathlib.Path, metavar="NEW", help="the run to compare with the baseline"
    )
    add_check_command(commands)

    add_autotune_command(commands)
    return parser


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


def _run_suite(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from ._suite_cli import run_suite

    return run_suite(parser, args)


def _run_targets(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from ._suite_cli import run_targets

    return run_targets(parser, args)


def _list(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from ._console import print_table

    modules = args.modules or [SUITE_MODULE]
    kernels = {k.name: k for module in modules for k in resolve(parser, module, args.tags)}
    if not kernels:
        tags = f" with tags {', '.join(args.tags)}" if args.tags else ""
        print(f"no kernels in {', '.join(modules)}{tags}")
        return 0
    rows = []
    for name, k in sorted(kernels.items()):
        row = [name, ", ".join(k.tags) or "-"]
        for p in BACKEND_PLATFORMS:
            default = k.get_default(p)
            row.append(
                ", ".join(b + ("*" if b == default else "") for b in k.available_backends(p)) or "-"
            )
        row.append("yes" if k.has_benchmark_data else "no")
        rows.append(row)
    header = ["kernel", "tags", *BACKEND_PLATFORMS, "benchmark data"]
    print_table(header, rows, [False] * len(header))
    print("\n* default backend of the platform")
    return 0


def _compare(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from ._compare import compare
    from ._result import BenchmarkResult

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
    if getattr(args, "output_dir", None) is not None:
        warnings.warn(
            "kernel-bench: --output-dir is deprecated and will be removed in the next release; "
            f"use --output {args.output_dir / (DEFAULT_STEM + '.json')}",
            FutureWarning,
            stacklevel=2,
        )
        if args.output is None:
            args.output = args.output_dir / f"{DEFAULT_STEM}.json"
    command = {
        None: _run_suite,
        "run": _run_targets,
        "list": _list,
        "compare": _compare,
        "check": run_check,
        "autotune": run_autotune,
    }
    if args.command is None and args.backends:
        # --backends takes every word after it, a command's name too.
        swallowed = [b for b in args.backends if b in command]
        if swallowed:
            parser.error(
                f"--backends took the command {swallowed[0]!r} as a backend's name; put the "
                f"command first (kernel-bench {swallowed[0]} ... --backends B ...)"
            )
    platform = getattr(args, "platform", None)
    if platform is not None and args.command in (None, "run", "autotune", "check"):
        _check_platform(parser, platform)
    if args.command in (None, "run", "autotune", "check"):
        _quiet_warp()
    if getattr(args, "devices", None) is not None:
        _use_cpu_devices(parser, args.devices)
    return command[args.command](parser, args)


def _check_platform(parser: argparse.ArgumentParser, platform: str) -> None:
    import jax

    try:
        jax.devices(platform)
    except RuntimeError:
        have = ", ".join(sorted({d.platform for d in jax.devices()}))
        parser.error(f"--platform {platform}: JAX has no {platform} device here (it has {have})")


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
