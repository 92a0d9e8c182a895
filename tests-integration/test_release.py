"""tools/release.py on a copy of the workspace's release files in tmp_path: a bump
writes the version, dates the CHANGELOG and marks the API snapshot released;
a bump that a dependent's range would not admit writes nothing and names it."""

import datetime
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture
def tree(tmp_path):
    # What the tool reads and writes, nothing more: it takes its root from its own path.
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "release.py", tmp_path / "tools")
    for package in (ROOT / "packages").iterdir():
        if not (package / "pyproject.toml").is_file():
            continue
        target = tmp_path / "packages" / package.name
        src = f"src/{package.name.replace('-', '_')}"
        (target / src).mkdir(parents=True)
        for name in ("pyproject.toml", "CHANGELOG.md", f"{src}/_version.py"):
            shutil.copy(package / name, target / name)
    return tmp_path


def _set(tree, package, *, changelog=None, version=None, snapshot=None):
    folder = tree / "packages" / package
    if changelog is not None:
        (folder / "CHANGELOG.md").write_text(changelog)
    if version is not None:
        path = folder / "src" / package.replace("-", "_") / "_version.py"
        path.write_text(f'__version__ = "{version}"\n')
    if snapshot is not None:
        (folder / "api.txt").write_text(snapshot)


def _release(tree, *args):
    return subprocess.run(
        [sys.executable, str(tree / "tools" / "release.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


CHANGELOG = """# Changelog

## Unreleased

- `numba_kernel` takes `sharding_rule`.

## 0.1.0 (unreleased)

- First version.

## 0.0.9 (2026-01-02)

- An older release.
"""

SNAPSHOT = """# The public API of numba-cpu-ffi.
# version: 0.1.0
# released-digest: 0000000000000000

[numba_cpu_ffi]
def numba_cpu_ffi.numba_kernel(kernel, outs)
"""


def _files(tree, package):
    folder = tree / "packages" / package
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_bump_patch_writes_the_version_the_changelog_and_the_snapshot(tree):
    _set(tree, "numba-cpu-ffi", changelog=CHANGELOG, version="0.1.0", snapshot=SNAPSHOT)
    proc = _release(tree, "bump", "numba-cpu-ffi", "patch", "--date", "2026-03-04")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:2] == [
        "done:",
        "  packages/numba-cpu-ffi/src/numba_cpu_ffi/_version.py: 0.1.0 -> 0.1.1",
    ]
    assert "  kernel-bench requires `numba-cpu-ffi>=0.1,<0.2`: admits 0.1.1" in proc.stdout
    folder = tree / "packages" / "numba-cpu-ffi"
    assert (folder / "src/numba_cpu_ffi/_version.py").read_text() == '__version__ = "0.1.1"\n'
    changelog = (folder / "CHANGELOG.md").read_text()
    # Every unreleased section, "## 0.1.0 (unreleased)" too, goes into the release.
    assert changelog == (
        "# Changelog\n\n## Unreleased\n\n"
        "## 0.1.1 (2026-03-04)\n\n"
        "- `numba_kernel` takes `sharding_rule`.\n\n- First version.\n\n"
        "## 0.0.9 (2026-01-02)\n\n- An older release.\n"
    )
    snapshot = (folder / "api.txt").read_text()
    assert "# version: 0.1.1\n" in snapshot
    assert "# released-digest: 0000000000000000" not in snapshot
    # A second release with nothing new is refused.
    proc = _release(tree, "bump", "numba-cpu-ffi", "patch")
    assert proc.returncode == 1
    assert proc.stderr == (
        "error: numba-cpu-ffi: nothing to release: the Unreleased section of "
        "packages/numba-cpu-ffi/CHANGELOG.md is empty\n"
    )
    proc = _release(tree, "notes", "numba-cpu-ffi", "0.1.1")
    assert proc.stdout == "- `numba_kernel` takes `sharding_rule`.\n\n- First version.\n"


def test_the_snapshot_digest_is_the_one_api_snapshot_takes(tree):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import api_snapshot
    finally:
        sys.path.pop(0)
    _set(tree, "numba-cpu-ffi", changelog=CHANGELOG, snapshot=SNAPSHOT)
    assert _release(tree, "bump", "numba-cpu-ffi", "minor").returncode == 1  # kernel-bench
    _set(tree, "numba-cpu-ffi", version="0.1.0")
    assert _release(tree, "bump", "numba-cpu-ffi", "patch").returncode == 0
    text = (tree / "packages/numba-cpu-ffi/api.txt").read_text()
    header, _ = api_snapshot.parse(text)
    assert header["released-digest"] == api_snapshot.digest(api_snapshot.file_body(text))


def test_bump_that_a_dependent_refuses_names_it_and_writes_nothing(tree):
    _set(tree, "xla-custom-kernel", changelog=CHANGELOG)
    before = _files(tree, "xla-custom-kernel")
    proc = _release(tree, "bump", "xla-custom-kernel", "minor")
    assert proc.returncode == 1
    assert proc.stderr == (
        "error: xla-custom-kernel 0.2.0 would break its dependents' ranges: kernel-bench "
        "requires `xla-custom-kernel[numba]>=0.1,<0.2` (packages/kernel-bench/pyproject.toml). "
        "Raise their upper bound to admit 0.2.0 (and add a CHANGELOG entry to each) before "
        "releasing.\n"
    )
    assert _files(tree, "xla-custom-kernel") == before


def test_dry_run_writes_nothing(tree):
    _set(tree, "ffi-core", changelog=CHANGELOG, version="0.1.4")
    before = _files(tree, "ffi-core")
    # Without --date the release is dated today; the run may cross midnight.
    days = {datetime.date.today().isoformat()}
    proc = _release(tree, "bump", "ffi-core", "patch", "--dry-run")
    days.add(datetime.date.today().isoformat())
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == [
        "would do (dry run):",
        "  packages/ffi-core/src/ffi_core/_version.py: 0.1.4 -> 0.1.5",
    ]
    assert lines[2] in {
        f"  packages/ffi-core/CHANGELOG.md: 3 unreleased line(s) under `## 0.1.5 ({day})`"
        for day in days
    }
    assert "  warp-ffi requires `ffi-core[native]>=0.1,<0.2`: admits 0.1.5" in lines
    assert _files(tree, "ffi-core") == before


def test_a_date_that_is_not_iso_is_refused(tree):
    _set(tree, "ffi-core", changelog=CHANGELOG, version="0.1.4")
    before = _files(tree, "ffi-core")
    proc = _release(tree, "bump", "ffi-core", "patch", "--date", "27.11.2026")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].endswith(
        "argument --date: `--date` must be a date as YYYY-MM-DD, got '27.11.2026'"
    )
    assert _files(tree, "ffi-core") == before


def test_major_bump_and_the_check_command(tree):
    _set(tree, "kernel-bench", changelog=CHANGELOG, version="0.3.2")
    proc = _release(tree, "bump", "kernel-bench", "major")
    assert proc.returncode == 1  # xla-custom-kernel[bench] requires kernel-bench<0.2
    # With the dependent's range raised first, the release goes through.
    pyproject = tree / "packages" / "xla-custom-kernel" / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace('"kernel-bench>=0.1,<0.2"', '"kernel-bench>=0.1,<2"')
    )
    proc = _release(tree, "bump", "kernel-bench", "major")
    assert proc.returncode == 0, proc.stderr
    assert "0.3.2 -> 1.0.0" in proc.stdout
    proc = _release(tree, "check")
    assert (proc.returncode, proc.stdout) == (
        0,
        "every range admits its package's current version\n",
    )
    _set(tree, "triton-ffi", version="0.2.0")
    proc = _release(tree, "check")
    assert proc.returncode == 1
    assert proc.stdout == (
        "xla-custom-kernel requires `triton-ffi>=0.1,<0.2` "
        "(packages/xla-custom-kernel/pyproject.toml)\n"
    )


def test_unknown_package_and_part_are_refused(tree):
    proc = _release(tree, "bump", "numpy", "patch")
    assert proc.returncode == 2
    assert re.search(r"argument package: invalid choice: 'numpy'", proc.stderr)
    proc = _release(tree, "bump", "ffi-core", "micro")
    assert re.search(r"argument part: invalid choice: 'micro'", proc.stderr)


def test_the_workspace_ranges_admit_every_current_version():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "release.py"), "check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
