"""Each package's public API (names and signatures) against its snapshot,
packages/<pkg>/api.txt, and a CHANGELOG entry for every change to it since the
last release. docs/compatibility.md says what the snapshot promises."""

import importlib.util
import pathlib
import sys

import pytest

TOOLS = pathlib.Path(__file__).resolve().parents[1] / "tools"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


api_snapshot = _load("api_snapshot")
release = _load("release")
PACKAGES = api_snapshot.workspace_packages()


@pytest.mark.parametrize("package", PACKAGES)
def test_public_api_matches_its_snapshot(package):
    top = api_snapshot.import_name(package)
    if importlib.util.find_spec(top) is None:
        pytest.skip(f"{package} is not installed in this environment")
    problems = api_snapshot.compare(package)
    assert not problems, (
        f"The public API of {package} changed:\n"
        + "\n".join(problems)
        + f"\nIf the change is meant: run `{api_snapshot.REGENERATE} {package}` and add an "
        f"entry naming it under `## Unreleased` in packages/{package}/CHANGELOG.md "
        "(docs/compatibility.md says what a minor and a patch release may change)."
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_api_change_since_the_release_has_a_changelog_entry(package):
    path = api_snapshot.snapshot_path(package)
    assert path.exists(), f"{path} is missing: run `{api_snapshot.REGENERATE} {package}`"
    text = path.read_text()
    header, _ = api_snapshot.parse(text)
    version = api_snapshot.package_version(package)
    assert header.get("version") == version, (
        f"{path} was written for {package} {header.get('version')}, the package is {version}: "
        f"run `{api_snapshot.REGENERATE} {package}`"
    )
    if api_snapshot.digest(api_snapshot.file_body(text)) != header.get("released-digest"):
        assert release.changelog(release.ROOT, package).unreleased(), (
            f"The public API of {package} differs from its last release, and "
            f"packages/{package}/CHANGELOG.md has no entry under `## Unreleased`: "
            "add one naming what changed."
        )


def test_snapshot_lines_name_signatures_and_members():
    # The format the contract relies on, on names whose shape is settled.
    sections, _ = api_snapshot.live_sections("ffi-core")
    lines = sections["ffi_core"]
    assert "def ffi_core.cache_root() -> 'Path'" in lines
    assert "class ffi_core.CacheDirWarning(UserWarning)" in lines
    index = lines.index("class ffi_core.ErrorCode(enum.IntEnum)")
    assert lines[index + 1] == "    .OK = 0"
    assert "module ffi_core.capi" in lines
    assert "ffi_core.capi" in sections
    assert all(not name.split(".")[-1].startswith("_") for name in sections)
