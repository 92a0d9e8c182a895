"""What each package's wheel declares: the licence text it ships, and the run-time
dependencies a lone install needs (checked against the built metadata)."""

from __future__ import annotations

import pathlib
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml"))


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_ships_the_licence(package):
    project = tomllib.loads((package / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    assert (package / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_numpy_bound_is_one_jax_admits(package):
    # jax 0.10, the oldest supported, needs NumPy 2.0; a lower bound under it can never be met.
    dependencies = tomllib.loads((package / "pyproject.toml").read_text())["project"][
        "dependencies"
    ]
    for requirement in dependencies:
        if requirement.startswith("numpy"):
            assert requirement.startswith("numpy>=2.0"), requirement


def test_ffi_core_declares_what_export_needs():
    # ffi_core.serialize goes through jax.export's flatbuffer writer, which jax does not declare.
    dependencies = tomllib.loads((ROOT / "packages/ffi-core/pyproject.toml").read_text())[
        "project"
    ]["dependencies"]
    assert any(d.startswith("flatbuffers") for d in dependencies)
