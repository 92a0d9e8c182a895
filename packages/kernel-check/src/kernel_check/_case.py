"""The operation under check, its sample inputs and the options: what every
check family gets, and the input variations they share."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._compare import first_difference
from ._report import CheckResult, failed, passed, skipped

__all__ = ["Case", "describe_error", "is_inexact", "param_names", "row_inputs", "stack_rows"]


def is_inexact(x: Any) -> bool:
    """Whether ``x`` holds floating-point or complex numbers."""
    return jnp.issubdtype(np.dtype(x.dtype), jnp.inexact)


def param_names(fn: Callable[..., Any]) -> list[str]:
    """The names of ``fn``'s positional parameters, in order (empty where
    its signature cannot be read)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def row_inputs(args: Sequence[Any], row: int) -> list[Any]:
    """The inputs of batch row ``row``: floating-point inputs scaled and
    shifted by the row, so that rows differ and a kernel that mixes them is
    seen; integer and bool inputs (indices, masks) unchanged, since changing
    them could make them invalid. Row 0 is ``args`` itself."""
    if row == 0:
        return list(args)
    return [
        (x * (1 + 0.25 * row) + 0.125 * row).astype(x.dtype) if is_inexact(x) else x
        for x in map(jnp.asarray, args)
    ]


def stack_rows(args: Sequence[Any], size: int) -> list[jax.Array]:
    """Every input stacked over ``size`` rows of :func:`row_inputs` (axis 0)."""
    rows = [row_inputs(args, b) for b in range(size)]
    return [jnp.stack([jnp.asarray(r[i]) for r in rows]) for i in range(len(args))]


def describe_error(exc: BaseException) -> str:
    """``TypeError: message``: the message's first line, at most 300 characters."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    text = text if len(text) <= _MESSAGE else text[: _MESSAGE - 3] + "..."
    return f"{type(exc).__name__}: {text}"


_MESSAGE = 300


@dataclasses.dataclass
class Case:
    """One ``check_kernel`` call.

    Attributes:
        name: the operation, for the report.
        fn: the operation on the inputs alone (its keywords bound).
        args: the sample inputs.
        reference: the reference function on the inputs, or None.
        variants: other implementations of the operation that must agree with
            it (backends), by name.
        options: the keyword options of ``check_kernel``.
    """

    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    reference: Callable[..., Any] | None
    variants: Mapping[str, Callable[..., Any]]
    options: Any
    families: frozenset[str] = frozenset()
    rows: frozenset[str] = frozenset()
    excluded: Mapping[str, str] = dataclasses.field(default_factory=dict)
    _expected: Any = None

    def __post_init__(self) -> None:
        # The inputs' values before any call: a kernel that writes into an
        # input changes the caller's array, and every later comparison with it.
        self.originals = tuple(np.array(x) for x in self.args)

    def wants(self, check: str) -> bool:
        """Whether row ``check`` is to run: its family or the row itself was
        selected, and neither was left out."""
        family = check.split(":", 1)[0]
        if check in self.excluded or family in self.excluded:
            return False
        return family in self.families or check in self.rows

    def run(self, check: str, compute: Callable[[], CheckResult]) -> list[CheckResult]:
        """``[compute()]`` when row ``check`` is wanted; a skipped row when the
        caller left it out by name; else nothing."""
        if check in self.excluded:
            return [skipped(check, self.excluded[check])]
        if not self.wants(check):
            return []
        try:
            return [compute()]
        except Exception as exc:  # a row that raises fails; the other rows still run
            return [failed(check, f"raised {describe_error(exc)}")]

    def describe_input(self, index: int) -> str:
        """``input 3 (`v`)``: the input by position, and by the op's parameter
        name where its signature gives one."""
        names = param_names(self.options.signature_of)
        return f"input {index}" + (f" (`{names[index]}`)" if index < len(names) else "")

    @property
    def expected(self) -> Any:
        """The operation's eager result on ``args`` (computed once)."""
        if self._expected is None:
            self._expected = jax.block_until_ready(self.fn(*self.args))
        return self._expected

    def compare(
        self, check: str, expected: Any, actual: Any, names=("expected", "got")
    ) -> CheckResult:
        """A row for ``check``: passed when ``actual`` agrees with ``expected``."""
        problem = first_difference(
            expected, actual, tolerances=self.options.tolerances, names=names
        )
        return passed(check) if problem is None else failed(check, problem)
