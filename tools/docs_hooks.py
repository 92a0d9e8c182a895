"""MkDocs hooks (mkdocs.yml `hooks:`): the pages of the site that are made from
other files, so that those files stay the one source.

- `tutorials/<name>.md` from each tutorial `docs/<name>.py`: its docstring as the
  introduction, its code cut into sections at its `# --- Title ---` comments,
  and what the program printed, run once per content (see `tutorial_output`).
- `packages/<pkg>.md` from each package's README, its links rewritten to the
  site's pages.
- `api/<pkg>.md`: mkdocstrings blocks for each public module of each package.

This module imports nothing from mkdocs at import time: docs/test_tutorials.py
loads it for `output_key` and `OUTPUT_ENV`, with only the dev tools installed.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGES = ROOT / "packages"
# A folder of tutorial outputs, `<name>.<key>.txt`: CI points docs/test_tutorials.py
# and the docs build at the same one, so the tutorials run once.
OUTPUT_ENV = "DOCS_TUTORIAL_OUTPUT_DIR"
_SECTION = re.compile(r"^# -{3,} (.+?) -*$")
_SUBMODULE_ALIAS = re.compile(r"^from \. import (_\w+) as (\w+)$", re.MULTILINE)


def tutorials() -> list[pathlib.Path]:
    """The tutorials, as docs/test_tutorials.py finds them."""
    return sorted(p for p in DOCS.glob("*.py") if not p.name.startswith("test_"))


def packages() -> list[str]:
    return sorted(p.name for p in PACKAGES.iterdir() if (p / "pyproject.toml").is_file())


# --- tutorial outputs ------------------------------------------------------------


def output_key(tutorial: pathlib.Path) -> str:
    """What a tutorial's output depends on: its text, the packages' sources and the
    lock file. A run of the same key may stand in for another."""
    digest = hashlib.sha256(tutorial.read_bytes())
    for path in sorted(PACKAGES.glob("*/src/**/*.py")):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    lock = ROOT / "uv.lock"
    if lock.exists():
        digest.update(lock.read_bytes())
    return digest.hexdigest()[:20]


def output_dir() -> pathlib.Path | None:
    """Where tutorial outputs are kept: $DOCS_TUTORIAL_OUTPUT_DIR, else a folder of the
    user's cache (None when it is refused: then nothing is kept)."""
    import ffi_core

    if os.environ.get(OUTPUT_ENV):
        path = pathlib.Path(os.environ[OUTPUT_ENV])
    else:
        path = ffi_core.cache_root() / "jax-kernel-bridge-docs" / "tutorial-outputs"
    return ffi_core.checked_cache_dir(path, purpose="the docs build's tutorial outputs")


def output_path(folder: pathlib.Path, tutorial: pathlib.Path, key: str) -> pathlib.Path:
    return folder / f"{tutorial.stem}.{key}.txt"


def run_tutorial(tutorial: pathlib.Path) -> str:
    """Run a tutorial as docs/test_tutorials.py does; its stdout, or RuntimeError."""
    result = subprocess.run(
        [sys.executable, str(tutorial)], capture_output=True, text=True, timeout=600
    )
    if result.returncode != 0 or "all steps passed" not in result.stdout:
        raise RuntimeError(
            f"{tutorial.name} failed (exit {result.returncode}); the page needs its output:\n"
            + result.stdout
            + result.stderr
        )
    return result.stdout


def tutorial_output(tutorial: pathlib.Path, folder: pathlib.Path | None) -> str:
    key = output_key(tutorial)
    if folder is not None:
        kept = output_path(folder, tutorial, key)
        if kept.is_file():
            return kept.read_text()
    output = run_tutorial(tutorial)
    if folder is not None:
        for stale in folder.glob(f"{tutorial.stem}.*.txt"):
            stale.unlink()
        output_path(folder, tutorial, key).write_text(output)
    return output


# --- page sources ------------------------------------------------------------------


def _markdown(text: str) -> str:
    # Docstrings use reST's double backticks; Markdown's single ones render the same.
    return re.sub(r"``([^`]+)``", r"`\1`", text)


def tutorial_page(tutorial: pathlib.Path, output: str) -> str:
    """A tutorial as a Markdown page: introduction, sections of code, output."""
    source = tutorial.read_text()
    match = re.match(r'\s*"""(.*?)"""\n', source, re.DOTALL)
    docstring, code = (match.group(1), source[match.end() :]) if match else ("", source)
    title, _, intro = docstring.strip().partition("\n\n")
    lines = [f"# {' '.join(title.split()).rstrip('.')}", "", _markdown(intro.strip()), ""]
    section: list[str] = []

    def flush() -> None:
        text = "\n".join(section).strip("\n")
        if text:
            lines.extend(["```python", text, "```", ""])
        section.clear()

    for line in code.splitlines():
        heading = _SECTION.match(line)
        if heading:
            flush()
            lines.extend([f"## {heading.group(1)}", ""])
        else:
            section.append(line)
    flush()
    lines += [
        "## Output",
        "",
        f"What `python docs/{tutorial.name}` printed when this page was built:",
        "",
        "```text",
        output.rstrip("\n"),
        "```",
        "",
    ]
    return "\n".join(lines)


# The package READMEs are also each package's page on the package index, so they link
# absolutely, to the published site and the repository (the packages' Project-URLs);
# in this site those links go to its own pages again.
DOCS_URL = "https://jax-kernel-bridge.github.io/jax-kernel-bridge/"
REPOSITORY_FILE_URL = "https://github.com/jax-kernel-bridge/jax-kernel-bridge/blob/main/"


def _repository_path(url: str) -> str | None:
    """The repository path an absolute link of the published site or repository names."""
    if url.startswith(REPOSITORY_FILE_URL):
        return url[len(REPOSITORY_FILE_URL) :]
    if not url.startswith(DOCS_URL):
        return None
    parts = url[len(DOCS_URL) :].strip("/").split("/")
    if parts == [""]:
        return "docs/index.md"
    if parts[0] == "tutorials" and len(parts) == 2:
        return f"docs/{parts[1]}.py"
    if parts[0] == "packages" and len(parts) == 2:
        return f"packages/{parts[1]}/README.md"
    if len(parts) == 1:
        return f"docs/{parts[0]}.md"
    return None


def _site_link(target: str, page_dir: str) -> str:
    """A link of a README or docs page (relative to the repository) as a link of the site.

    `page_dir` is the repository folder of the page the link is in."""
    path, _, anchor = target.partition("#")
    resolved = _repository_path(path)
    if resolved is None:
        if not path or re.match(r"^[a-z]+:", path):
            return target
        resolved = os.path.normpath(os.path.join(page_dir, path))
    parts = pathlib.PurePosixPath(resolved).parts
    site: str | None = None
    if parts[:1] == ("docs",) and len(parts) == 2:
        name = parts[1]
        site = f"tutorials/{name[:-3]}.md" if name.endswith(".py") else name
    elif parts[:1] == ("packages",) and len(parts) >= 2:
        if len(parts) == 2 or parts[2:] == ("README.md",):
            site = f"packages/{parts[1]}.md"
        elif parts[2:] == ("api.txt",):
            site = f"api/{parts[1]}.md"  # the snapshot's names, documented
    if site is None:
        return target  # left as it is: MkDocs reports it if it is broken
    # The page's own folder in the site.
    site_dir = {"docs": "", "packages": "packages"}.get(page_dir.split("/")[0], "")
    relative = os.path.relpath(site, site_dir or ".")
    return relative + (f"#{anchor}" if anchor else "")


def rewrite_links(markdown: str, page_dir: str) -> str:
    return re.sub(
        r"\]\(([^)\s]+)\)",
        lambda m: f"]({_site_link(m.group(1), page_dir)})",
        markdown,
    )


def public_modules(package: str) -> list[str]:
    """The public modules of a package, from its files: the top module, every module
    and subpackage whose dotted name has no leading underscore, and private modules
    re-exported under a public name (`from . import _capi as capi`)."""
    top = package.replace("-", "_")
    src = PACKAGES / package / "src" / top
    found = []
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if any(part.startswith("_") for part in parts):
            continue
        text = path.read_text()
        if "__all__ = sorted(_MOVED)" in text or "moved_module(__name__)" in text:
            continue  # a module kept only as a deprecation shim: documented where it moved
        found.append(".".join(parts))
        if path.name == "__init__.py":
            found += [".".join([*parts, public]) for _, public in _SUBMODULE_ALIAS.findall(text)]
    return sorted(set(found), key=lambda name: (name.count("."), name))


def api_page(package: str) -> str:
    modules = public_modules(package)
    lines = [
        f"# {package}",
        "",
        f"The public API of [{package}](../packages/{package}.md): every name in the "
        "`__all__` of each public module, as `packages/{package}/api.txt` records it "
        "(see [Compatibility](../compatibility.md) for what each release may change).".replace(
            "{package}", package
        ),
        "",
        "Modules: " + ", ".join(f"`{m}`" for m in modules) + ".",
        "",
    ]
    for module in modules:
        lines += [f"::: {module}", ""]
    return "\n".join(lines)


# --- MkDocs events ---------------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    folder = output_dir()
    paths = tutorials()
    with ThreadPoolExecutor(max_workers=2) as pool:  # the tutorials are processes
        outputs = list(pool.map(lambda p: tutorial_output(p, folder), paths))
    for tutorial, output in zip(paths, outputs, strict=True):
        files.append(
            File.generated(
                config, f"tutorials/{tutorial.stem}.md", content=tutorial_page(tutorial, output)
            )
        )
    for package in packages():
        readme = (PACKAGES / package / "README.md").read_text()
        files.append(
            File.generated(
                config,
                f"packages/{package}.md",
                content=rewrite_links(readme, f"packages/{package}"),
            )
        )
        files.append(File.generated(config, f"api/{package}.md", content=api_page(package)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    # Hand-written pages under docs/ link to READMEs and tutorials by repository paths.
    if page.file.generated_by is None and "/" not in page.file.src_uri:
        return rewrite_links(markdown, "docs")
    return markdown
