"""Fixtures shared by numba-cpu-ffi's tests: folders that processes fill
(a cache, a prebuilt directory), built once per test run."""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

#: How long an xdist worker waits for another one to build a folder.
_WAIT_S = 900


@pytest.fixture(scope="session")
def built_once(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str, Callable[[Path], None]], Path]:
    """``built_once(name, build)``: the folder ``name`` that ``build(folder)``
    filled, once per test run: the first xdist worker to ask builds it, the
    others wait for it (a failed build fails them too). Tests read it, or
    work on copies."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # this run's, shared by its workers
    root = root / "built-once"
    root.mkdir(exist_ok=True)

    def once(name: str, build: Callable[[Path], None]) -> Path:
        folder, done, failed = root / name, root / f"{name}.done", root / f"{name}.failed"
        try:
            (root / f"{name}.lock").mkdir()
        except FileExistsError:
            deadline = time.monotonic() + _WAIT_S
            while not done.exists():
                if failed.exists():
                    pytest.fail(
                        f"building {name} failed earlier in this run:\n{failed.read_text()}"
                    )
                if time.monotonic() > deadline:
                    pytest.fail(f"building {name} took another worker over {_WAIT_S} s")
                time.sleep(0.1)
            return folder
        folder.mkdir()
        try:
            build(folder)
        except BaseException:
            partial = root / f"{name}.failing"
            partial.write_text(traceback.format_exc())
            partial.replace(failed)
            raise
        done.touch()
        return folder

    return once
