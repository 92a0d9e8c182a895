"""Run every tutorial in docs/ as the program it is."""

import pathlib
import subprocess
import sys

import pytest

TUTORIALS = sorted(
    p for p in pathlib.Path(__file__).parent.glob("*.py") if not p.name.startswith("test_")
)


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_tutorial_runs(path: pathlib.Path) -> None:
    result = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all steps passed" in result.stdout
