"""Run every tutorial in docs/ as the program it is.

Where $DOCS_TUTORIAL_OUTPUT_DIR names a folder (CI sets it), each tutorial's
output is kept there for the docs site's build, which then need not run the
tutorials again (tools/docs_hooks.py)."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

TUTORIALS = sorted(
    p for p in pathlib.Path(__file__).parent.glob("*.py") if not p.name.startswith("test_")
)
_HOOKS = pathlib.Path(__file__).resolve().parents[1] / "tools" / "docs_hooks.py"


def _keep_output(path: pathlib.Path, output: str) -> None:
    folder = os.environ.get("DOCS_TUTORIAL_OUTPUT_DIR")
    if not folder:
        return
    spec = importlib.util.spec_from_file_location("docs_hooks", _HOOKS)
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    pathlib.Path(folder).mkdir(mode=0o700, parents=True, exist_ok=True)
    hooks.output_path(pathlib.Path(folder), path, hooks.output_key(path)).write_text(output)


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_tutorial_runs(path: pathlib.Path) -> None:
    result = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all steps passed" in result.stdout
    _keep_output(path, result.stdout)
