"""A pytest plugin for CI only (loaded with ``-p ci_outcomes``, ``.ci`` on PYTHONPATH).

CI runs every package's tests once, in an environment holding only that package.
The README's whole-workspace command then runs only what those legs could not
prove: the integration tests, the tutorials, and every test that was skipped or
failed in its package's own leg (a test that needs a sibling package, say).

- ``CI_RECORD_PASSED=FILE``: append the node id of every test that passed.
- ``CI_SKIP_PASSED=FILE``: deselect the tests whose node id is in FILE.
"""

from __future__ import annotations

import os

import pytest

_outcomes: dict[str, str] = {}


def _is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Under xdist the controller receives every worker's reports, so it alone records.
    if report.failed or report.skipped:
        _outcomes[report.nodeid] = "not passed"
    elif report.when == "call":
        _outcomes.setdefault(report.nodeid, "passed")


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("CI_RECORD_PASSED")
    if not path or _is_xdist_worker(session.config):
        return
    with open(path, "a", encoding="utf-8") as file:
        for nodeid, outcome in sorted(_outcomes.items()):
            if outcome == "passed":
                file.write(nodeid + "\n")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = os.environ.get("CI_SKIP_PASSED")
    if not path or not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as file:
        done = {line.strip() for line in file if line.strip()}
    keep = [item for item in items if item.nodeid not in done]
    dropped = [item for item in items if item.nodeid in done]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
