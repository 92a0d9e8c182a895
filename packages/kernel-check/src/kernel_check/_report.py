"""What ``check_kernel`` returns: one row per check, printed as a table."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable

__all__ = ["CheckReport", "CheckResult", "Status"]


class Status(enum.Enum):
    """The outcome of one check."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One row of a :class:`CheckReport`.

    Attributes:
        check: the family and the case, ``"vmap: batch axis 1"``.
        status: passed, failed or skipped.
        detail: for a failure the first difference and where; for a skip why;
            for a pass what was compared, where that says more than the name.
    """

    check: str
    status: Status
    detail: str = ""

    @property
    def family(self) -> str:
        """The check family, the part of :attr:`check` before the colon."""
        return self.check.split(":", 1)[0]


def passed(check: str, detail: str = "") -> CheckResult:
    return CheckResult(check, Status.PASSED, detail)


def failed(check: str, detail: str) -> CheckResult:
    return CheckResult(check, Status.FAILED, detail)


def skipped(check: str, why: str) -> CheckResult:
    return CheckResult(check, Status.SKIPPED, why)


_WIDTH = 100  # of the detail column before it wraps onto the next lines


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """The rows of one ``check_kernel`` run; ``str()`` gives the table.

    Example:
        >>> report = CheckReport("scale", (CheckResult("results: eager vs jit", Status.PASSED),))
        >>> report.ok, len(report.failed)
        (True, 0)
        >>> print(report)
        check_kernel(scale): 1 passed, 0 failed, 0 skipped
        check                  status  detail
        ---------------------  ------  ------
        results: eager vs jit  passed
    """

    op: str
    results: tuple[CheckResult, ...]

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        """The rows that failed."""
        return self._with(Status.FAILED)

    @property
    def passed(self) -> tuple[CheckResult, ...]:
        """The rows that passed."""
        return self._with(Status.PASSED)

    @property
    def skipped(self) -> tuple[CheckResult, ...]:
        """The rows that were skipped, each saying why."""
        return self._with(Status.SKIPPED)

    @property
    def ok(self) -> bool:
        """Whether no check failed."""
        return not self.failed

    def _with(self, status: Status) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.status is status)

    def summary(self) -> str:
        """``check_kernel(op): 12 passed, 1 failed, 3 skipped``."""
        return (
            f"check_kernel({self.op}): {len(self.passed)} passed, {len(self.failed)} failed, "
            f"{len(self.skipped)} skipped"
        )

    def __str__(self) -> str:
        return "\n".join([self.summary(), *_table(self.results)])

    def raise_for_failures(self) -> None:
        """Raise one AssertionError listing every failed check; nothing when
        none failed."""
        if self.failed:
            lines = "\n".join(_table(self.failed))
            raise AssertionError(
                f"check_kernel({self.op}): {len(self.failed)} of {len(self.results)} checks "
                f"failed\n{lines}"
            )


def _wrap(text: str) -> list[str]:
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        while len(paragraph) > _WIDTH:
            cut = paragraph.rfind(" ", 0, _WIDTH)
            cut = cut if cut > 0 else _WIDTH
            lines.append(paragraph[:cut])
            paragraph = paragraph[cut:].lstrip()
        lines.append(paragraph)
    return lines


def _table(rows: Iterable[CheckResult]) -> list[str]:
    rows = list(rows)
    width = max([len("check"), *(len(r.check) for r in rows)])
    status_width = len("skipped") if any(r.status is Status.SKIPPED for r in rows) else 6
    lines = [
        f"{'check':<{width}}  {'status':<{status_width}}  detail",
        f"{'-' * width}  {'-' * status_width}  ------",
    ]
    for r in rows:
        detail = _wrap(r.detail)
        lines.append(f"{r.check:<{width}}  {r.status.value:<{status_width}}  {detail[0]}".rstrip())
        lines.extend(f"{'':<{width}}  {'':<{status_width}}  {more}" for more in detail[1:])
    return lines
