"""Each package's page on a package index reads well on its own: Project-URLs,
authors, classifiers and keywords in its metadata, and a README (the page's text)
whose every link is absolute and names a page of the site or a file of the
repository that exists. tools/wheel_smoke.py checks the same in the built wheels."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.parent for p in (ROOT / "packages").glob("*/pyproject.toml"))
# The one repository and documentation site every package names.
REPOSITORY_URL = "https://github.com/jax-kernel-bridge/jax-kernel-bridge"
DOCS_URL = "https://jax-kernel-bridge.github.io/jax-kernel-bridge/"
PYTHON_CLASSIFIERS = [f"Programming Language :: Python :: 3.{minor}" for minor in (11, 12, 13)]
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "tools" / "docs_hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return hooks


def _project(package: pathlib.Path) -> dict:
    return tomllib.loads((package / "pyproject.toml").read_text())["project"]


def test_docs_site_maps_the_same_urls():
    hooks = _hooks()
    assert hooks.DOCS_URL == DOCS_URL
    assert hooks.REPOSITORY_FILE_URL == f"{REPOSITORY_URL}/blob/main/"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_project_urls(package):
    urls = _project(package)["urls"]
    assert urls == {
        "Homepage": DOCS_URL,
        "Documentation": f"{DOCS_URL}packages/{package.name}/",
        "Repository": REPOSITORY_URL,
        "Changelog": f"{REPOSITORY_URL}/blob/main/packages/{package.name}/CHANGELOG.md",
        "Issues": f"{REPOSITORY_URL}/issues",
    }
    assert (package / "CHANGELOG.md").is_file()


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_authors_keywords_classifiers(package):
    project = _project(package)
    assert project["authors"]
    assert "jax" in project["keywords"]
    classifiers = project["classifiers"]
    assert len(set(classifiers)) == len(classifiers)
    assert sum(c.startswith("Development Status :: ") for c in classifiers) == 1
    assert project["requires-python"] == ">=3.11"
    for expected in [*PYTHON_CLASSIFIERS, "Typing :: Typed", "Topic :: Scientific/Engineering"]:
        assert expected in classifiers
    # The licence is the License-Expression; PEP 639 supersedes License :: classifiers.
    assert not [c for c in classifiers if c.startswith("License ::")]
    assert (package / "src" / package.name.replace("-", "_") / "py.typed").is_file()


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_readme_links_work_outside_the_repository(package):
    hooks = _hooks()
    for target in _LINK.findall((package / "README.md").read_text()):
        if target.startswith("#"):
            continue
        assert target.startswith("https://"), f"{package.name}/README.md links to {target}"
        path = hooks._repository_path(target.partition("#")[0])
        if target.startswith((DOCS_URL, REPOSITORY_URL)):
            assert path is not None, f"{package.name}/README.md: no page for {target}"
            assert (ROOT / path).is_file(), f"{package.name}/README.md: {target} names {path}"
