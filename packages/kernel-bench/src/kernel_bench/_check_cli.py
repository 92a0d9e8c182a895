"""``kernel-bench check OP...``: ``check_kernel`` on operations from the command line.

An operation is a bundled example by name (checked on its small sample
inputs, with its NumPy reference) or ``MODULE:ATTR`` naming an
``XLACustomKernel`` (checked on its smallest benchmark case, through its call
function).
"""

from __future__ import annotations

import argparse
from typing import Any

from ._cli_common import import_module, short_name

__all__ = ["add_check_command", "run_check"]


def add_check_command(commands: Any) -> None:
    """Add the ``check`` subcommand to the subparsers ``commands``."""
    check = commands.add_parser(
        "check",
        help="check operations under every JAX transform (check_kernel)",
        description="Check operations with xla_custom_kernel.testing.check_kernel: results, "
        "backends, vmap, autodiff, compilation, export in a fresh process, aliases, threads "
        "and bad inputs. Prints a report per operation; the exit status is 1 when a check "
        "failed.",
    )
    check.add_argument(
        "targets",
        nargs="*",
        metavar="OP",
        help="an operation of the bundled suite by name (checked on small sample inputs), or "
        "MODULE:ATTR naming an XLACustomKernel (checked on its smallest benchmark case); "
        "none: every bundled example",
    )
    check.add_argument(
        "--checks", nargs="+", metavar="CHECK", help="only these checks (families or rows)"
    )
    check.add_argument("--skip", nargs="+", metavar="CHECK", help="leave these checks out")


def _bundled() -> dict[str, Any]:
    # By the short name the command line takes (`csr_matvec`), and by the full one.
    from .examples import example_kernels

    kernels = example_kernels()
    return {**{short_name(op.name): op for op in kernels}, **{op.name: op for op in kernels}}


def _from_module(parser: argparse.ArgumentParser, target: str) -> Any:
    module_name, _, attr = target.partition(":")
    if not attr:
        from .examples import example_kernels

        bundled = ", ".join(short_name(op.name) for op in example_kernels())
        parser.error(
            f"operation '{target}' is neither a bundled example ({bundled}) nor MODULE:ATTR"
        )
    obj: Any = import_module(parser, module_name)
    for part in attr.split("."):
        if not hasattr(obj, part):
            parser.error(f"module '{module_name}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    from xla_custom_kernel import XLACustomKernel

    if not isinstance(obj, XLACustomKernel):
        parser.error(f"'{target}' must be an XLACustomKernel, got {type(obj)!r}")
    return obj


def _inputs(parser: argparse.ArgumentParser, op: Any, platform: str) -> dict[str, Any]:
    # The keywords of check_kernel for `op`: its sample where it is a bundled
    # example, else its smallest benchmark case.
    from .examples._samples import SAMPLES

    sample = SAMPLES.get(short_name(op.name))
    if sample is not None and _bundled().get(op.name) is op:
        return {
            "args": sample.args,
            "kwargs": sample.kwargs,
            "reference": sample.reference,
            "other_args": sample.other_args,
            "skip": dict(sample.skip),
        }
    if not op.has_call or not op.has_benchmark_data:
        parser.error(
            f"kernel '{op.name}' needs a call function (def_call) and benchmark data "
            "(def_benchmark_data) to be checked from the command line; in a test, call "
            "xla_custom_kernel.testing.check_kernel with inputs of your own"
        )
    cases = op.benchmark_data(platform=platform)
    if not cases:
        parser.error(f"kernel '{op.name}' has no benchmark case for platform '{platform}'")
    case = min(cases, key=lambda c: sum(getattr(a, "size", 1) for a in c.args))
    return {"args": tuple(case.args), "kwargs": dict(case.kernel_kwargs), "skip": {}}


def run_check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Check each operation of ``args.targets``; 1 when a check failed."""
    from xla_custom_kernel.testing import check_kernel

    from ._kernel import default_platform

    bundled = _bundled()
    targets = args.targets or [op.name for op in dict.fromkeys(bundled.values())]
    ops = [bundled.get(t) or _from_module(parser, t) for t in targets]
    platform = default_platform()
    status = 0
    for op in ops:
        inputs = _inputs(parser, op, platform)
        skip = {**inputs.pop("skip"), **dict.fromkeys(args.skip or (), "left out by --skip")}
        try:
            report = check_kernel(
                op,
                *inputs.pop("args"),
                **inputs,
                checks=args.checks,
                skip=skip,
                raises=False,
            )
        except (TypeError, ValueError) as exc:
            parser.error(str(exc))
        print(report)
        print()
        status = status or int(not report.ok)
    return status
