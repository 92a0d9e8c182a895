"""What the ``kernel-bench`` subcommands share: naming kernels, common options, and help text
built on demand.

Nothing here imports JAX: ``kernel-bench --help`` answers before JAX starts.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any

from ._config import BACKEND_PLATFORMS

__all__ = ["SUITE_MODULE", "LazyHelpParser", "add_scale_and_platform", "import_module", "resolve"]

# The bundled suite: a module whose example_kernels() reads its registry (the
# operations, in run order) and whose set_scale sizes their data. Imported by
# name when a command needs it: `list` and the suite share the one name, and
# `compare` never imports Numba.
SUITE_MODULE = "kernel_bench.examples"
# The bundled examples' kernel names start so (`kernel_bench.examples.axpy`);
# the command line also takes them without it (`axpy`).
EXAMPLES_PREFIX = f"{SUITE_MODULE}."


def short_name(name: str) -> str:
    """A bundled example's kernel name as the command line takes it (``axpy``)."""
    return name.removeprefix(EXAMPLES_PREFIX)


class LazyHelpParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose description and argument help may be callables,
    called only when the help is shown: a subcommand whose help names a value
    that needs JAX (a cache folder, a default) costs nothing to other commands."""

    def format_help(self) -> str:
        if callable(self.description):
            self.description = self.description()
        for action in self._actions:
            if callable(action.help):
                action.help = action.help()
        return super().format_help()


def add_scale_and_platform(
    parser: argparse.ArgumentParser,
    *,
    quick: str,
    full: str,
    platform: str,
    defaults: bool = True,
) -> None:
    """``--quick``/``--full`` (``scale``: ``"quick"``, ``"full"``, else ``"default"``)
    and ``--platform`` (None: JAX's default device), with the command's help for each.
    ``defaults=False``: an option not given sets nothing (a subcommand's copy of
    options the command itself takes, so that those given before it stay)."""
    unset = "default" if defaults else argparse.SUPPRESS
    size = parser.add_mutually_exclusive_group()
    for flag, help_text in (("quick", quick), ("full", full)):
        size.add_argument(
            f"--{flag}",
            dest="scale",
            action="store_const",
            const=flag,
            default=unset,
            help=help_text,
        )
    parser.add_argument(
        "--platform",
        choices=BACKEND_PLATFORMS,
        default=None if defaults else argparse.SUPPRESS,
        help=platform,
    )


def import_module(parser: argparse.ArgumentParser, module: str) -> Any:
    """``module`` imported, else a usage error naming it: one line with the
    exception's type and the first line of its message (whatever the module
    raised while it was imported), never a traceback."""
    try:
        return importlib.import_module(module)
    except Exception as exc:  # the user's module: anything it raises is its error
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        parser.error(
            f"cannot import module '{module}': {type(exc).__name__}: {lines[0] if lines else ''}"
        )


def resolve(parser: argparse.ArgumentParser, target: str, tags: Sequence[str] | None) -> list[Any]:
    """The kernels ``target`` names (``MODULE[:ATTR]``), those with any of ``tags``.

    A bare ``MODULE`` names the kernels created by its code or its submodules'
    (``XLACustomKernel.module``) and those its namespace holds (a kernel, or a
    list or tuple of kernels, as an attribute), in creation order."""
    module_name, _, attr = target.partition(":")
    module = import_module(parser, module_name)
    if not attr:
        from xla_custom_kernel import registered_kernels

        held = {id(k) for v in vars(module).values() for k in _kernels_in(v)}
        return [
            k
            for k in registered_kernels(tags=tags).values()
            if id(k) in held or k.module == module_name or k.module.startswith(module_name + ".")
        ]
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            parser.error(f"module '{module_name}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    found = list(obj) if isinstance(obj, list | tuple) else [obj]
    for k in found:
        if not all(hasattr(k, a) for a in ("name", "available_backends", "benchmark_data")):
            parser.error(f"'{target}' must be an XLACustomKernel or a list of them, got {k!r}")
    if tags:
        found = [k for k in found if set(k.tags) & set(tags)]
    return found


def _kernels_in(value: Any) -> list[Any]:
    # A module attribute's kernels: the value itself, or a list or tuple's items.
    from xla_custom_kernel import XLACustomKernel

    items = value if isinstance(value, list | tuple) else [value]
    return [k for k in items if isinstance(k, XLACustomKernel)]
