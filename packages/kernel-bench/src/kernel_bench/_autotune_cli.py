"""``kernel-bench autotune``: show, clear or make the decisions of backend ``"auto"``.

The parser is built without importing JAX (its help text that needs the
autotuner is computed when shown); the handler imports what it runs.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from ._cli_common import EXAMPLES_PREFIX, SUITE_MODULE, add_scale_and_platform, resolve, short_name

__all__ = ["add_autotune_command", "run_autotune"]


def _description() -> str:
    from . import autotune
    from .autotune._location import where

    return (
        'Backend "auto" picks, per operation and call signature, the fastest '
        "registered backend, measured once and kept on disk "
        f"({where()}; set ${autotune.CACHE_ENV} to move it)."
    )


def _budget_help() -> str:
    from . import autotune

    return f"seconds of timing per new decision (default {autotune.DEFAULT_BUDGET_S})"


def add_autotune_command(commands: Any) -> None:
    """Add the ``autotune`` subcommand to ``commands`` (an ``add_subparsers`` result).

    ``autotune run`` takes only the options that mean something there: the
    scale of the bundled suite's data, the platform and the budget (none of
    ``run``'s timing, output or ``--autotune`` options).
    """
    tuning = commands.add_parser(
        "autotune",
        help='show, clear or make the decisions of backend "auto"',
        description=_description,
    )
    actions = tuning.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser(
        "show",
        help="the decisions on disk, each with its margin over the runner-up, the noise of "
        "its rounds and whether the machine was busy",
    )
    show.add_argument("ops", nargs="*", metavar="OP", help="only these operations")
    clear = actions.add_parser("clear", help="forget decisions")
    clear.add_argument("ops", nargs="*", metavar="OP", help="only these operations (default all)")
    tune_run = actions.add_parser(
        "run",
        help="decide for every benchmark case of operations, and explain",
        description="Lower every benchmark case of the operations with backend 'auto' "
        "and show each decision (measured, or read from the cache), with its margin over "
        "the runner-up, the noise of its rounds and whether the machine was busy.",
    )
    add_scale_and_platform(
        tune_run,
        quick="the bundled suite's small data",
        full="the bundled suite's largest data",
        platform="where to decide (default: JAX's default device)",
        # Given before `autotune`, the command's --platform and --quick/--full stay.
        defaults=False,
    )
    tune_run.add_argument(
        "targets",
        nargs="+",
        metavar="OP",
        help="an operation of the bundled suite by name, or MODULE[:ATTR] as for run",
    )
    tune_run.add_argument("--budget", type=float, metavar="S", help=_budget_help)


def _suite_kernel(parser: argparse.ArgumentParser, target: str, scale: str) -> list[Any]:
    # An operation of the bundled suite by name, else MODULE[:ATTR] as for run.
    suite = importlib.import_module(SUITE_MODULE)
    suite.set_scale(scale)

    kernels = suite.example_kernels()
    by_name = {**{short_name(k.name): k for k in kernels}, **{k.name: k for k in kernels}}
    if target in by_name:
        return [by_name[target]]
    if ":" not in target and "." not in target:
        names = ", ".join(short_name(k.name) for k in kernels)
        parser.error(
            f"no operation named '{target}' in the bundled suite ({names}); "
            "name one of those, or give MODULE[:ATTR]"
        )
    return resolve(parser, target, None)


def _name_unknown_ops(ops: Sequence[str], cached: set[str]) -> None:
    # An operation named that the cache holds no decision of (a misspelt name,
    # most often): said on stderr with the operations it does hold.
    unknown = [op for op in ops if op not in cached and EXAMPLES_PREFIX + op not in cached]
    if unknown:
        held = ", ".join(sorted(short_name(op) for op in cached)) or "none"
        print(
            f"kernel-bench: no autotune decisions of {', '.join(unknown)} "
            f"(operations with decisions: {held})",
            file=sys.stderr,
        )


def run_autotune(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The ``autotune`` subcommand; returns the exit status."""
    from . import autotune
    from ._kernel import AUTO, default_platform
    from .autotune._location import where

    # A bundled example by its short name too (`axpy` for kernel_bench.examples.axpy).
    names = {n for op in getattr(args, "ops", None) or () for n in (op, EXAMPLES_PREFIX + op)}
    if args.action in ("clear", "show") and args.ops:
        from .autotune._cache import cached_ops

        _name_unknown_ops(args.ops, cached_ops())
    if args.action == "clear":
        removed = sum(autotune.clear(op) for op in (sorted(names) or [None]))
        what = "all operations" if not args.ops else ", ".join(args.ops)
        print(f"removed {removed} decision(s) of {what} from {where()}")
        return 0
    if args.action == "show":
        decisions = [d for d in autotune.cached_decisions() if not names or d.op in names]
        if not decisions:
            print(f"no autotune decisions in {where()}")
            return 0
        for d in decisions:
            print(d.describe() + "\n")
        return 0
    if args.budget is not None:
        if not args.budget > 0:
            parser.error(f"--budget must be a positive number of seconds, got {args.budget}")
        autotune.set_budget(args.budget)
    platform = args.platform or default_platform()
    import jax

    kernels = [k for t in args.targets for k in _suite_kernel(parser, t, args.scale)]
    device = jax.devices(platform)[0]
    status = 0
    for kernel in dict.fromkeys(kernels):
        if not kernel.has_call or not kernel.has_benchmark_data:
            print(f"kernel-bench: skipping '{kernel.name}': it needs def_call and benchmark data")
            status = 1
            continue
        for cfg in kernel.benchmark_data(platform=platform):
            call = functools.partial(kernel.call, backend=AUTO, **cfg.kernel_kwargs)
            with autotune.recording() as found:
                jax.jit(call).lower(*jax.device_put(cfg.args, device))
            print(f"# {kernel.name}/{cfg.name}")
            for d in dict((d.key, d) for d in found).values():
                print(d.describe() + "\n")
    return status
