"""Check the built docs site (site/, from `uv run --group docs mkdocs build --strict`).

1. Every public name of every package (packages/<pkg>/api.txt) has its entry in
   the package's API page (an element whose id is the name); deprecated names
   are documented at their new place.
2. A headless Chromium loads the start page and one API page from a server on
   127.0.0.1 and the rendered DOM holds what a reader should see (the page's
   title, its navigation, a rendered signature). `--screenshot DIR` also saves
   PNGs of both.

    uv run python tools/check_docs_site.py [--site site] [--install] [--screenshot DIR]
    uv run python tools/check_docs_site.py --install-only   # CI, as a step of its own

Without Chromium, `--install` installs Debian's `chromium` with apt-get; where
that cannot be done, step 2 is skipped with the reason printed (exit 0), so CI
passes on a machine without a browser but says so.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import html.parser
import http.server
import pathlib
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--virtual-time-budget=5000",  # let the page's scripts run before the DOM is read
]
# (page, texts the rendered DOM must hold): the start page and one API page.
PAGES = [
    (
        "index.html",
        [
            "<title>Custom kernels as first-class JAX operations",
            "Where to start",
            'href="api/ffi-core/"',
            'class="md-nav',  # the theme's navigation
            'class="md-code__nav',  # copy buttons: the theme's scripts ran
        ],
    ),
    (
        "api/numba-cpu-ffi/index.html",
        [
            'id="numba_cpu_ffi.numba_kernel"',
            'class="doc doc-heading"',
            "input_output_aliases",  # from the rendered signature
            'class="md-nav',
            'class="md-code__nav',
        ],
    ),
]
_NAME = re.compile(r"^(?:def |class |module )?([A-Za-z_][\w.]*)")


_DEPRECATED_MARKS = ("    deprecated: moved to ", "    deprecated: renamed to ")
# A moved module's names: "old.name -> new.name  [deprecated]".
_FORWARDED = "  [deprecated]"


def public_names(snapshot: pathlib.Path) -> list[str]:
    """The qualified public names an api.txt lists (not their members), less those
    marked deprecated (kept at an old place, documented at their new one), the
    names a moved module forwards, and the names of a deprecated module's section."""
    names: list[str] = []
    deprecated: set[str] = set()
    section = ""
    for line in snapshot.read_text().splitlines():
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if line.startswith(_DEPRECATED_MARKS) and names:
            deprecated.add(names[-1])
            continue
        if not line or line[0] in "#[ " or line.endswith(_FORWARDED):
            continue
        match = _NAME.match(line)
        if match:
            names.append(match.group(1))
            if section in deprecated:
                deprecated.add(match.group(1))
    return [name for name in names if name not in deprecated]


class _Ids(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids.update(value for key, value in attrs if key == "id" and value)


def missing_names(site: pathlib.Path) -> list[str]:
    """`<package>: <name>` for each public name its API page has no entry for."""
    missing = []
    for snapshot in sorted(ROOT.glob("packages/*/api.txt")):
        package = snapshot.parent.name
        page = site / "api" / package / "index.html"
        if not page.is_file():
            missing.append(f"{package}: no API page ({page.relative_to(site)})")
            continue
        parser = _Ids()
        parser.feed(page.read_text())
        missing += [f"{package}: {n}" for n in public_names(snapshot) if n not in parser.ids]
    return missing


def find_chromium(install: bool) -> tuple[str | None, str]:
    """The browser's path, or None and why there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path, ""
    if not install:
        return None, "no chromium on PATH (pass --install to install it with apt-get)"
    if shutil.which("apt-get") is None:
        return None, "no chromium on PATH and no apt-get to install it"
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        result = subprocess.run(
            command, capture_output=True, text=True, check=False, timeout=600,
            env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
        )  # fmt: skip
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or [""]
            return None, f"`{' '.join(command)}` failed (exit {result.returncode}): {tail[0]}"
    path = shutil.which("chromium")
    return path, "" if path else "apt-get installed chromium, but it is not on PATH"


@contextlib.contextmanager
def serve(site: pathlib.Path) -> Iterator[str]:
    """The site served on 127.0.0.1 on a free port, for the duration of the block."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def rendered_dom(chromium: str, url: str) -> str:
    result = subprocess.run(
        [chromium, *CHROMIUM_FLAGS, "--dump-dom", url],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if result.returncode != 0:
        raise RuntimeError(f"chromium failed on {url} (exit {result.returncode}): {result.stderr}")
    return result.stdout


def screenshot(chromium: str, url: str, path: pathlib.Path) -> None:
    subprocess.run(
        [chromium, *CHROMIUM_FLAGS, "--window-size=1280,1400", f"--screenshot={path}", url],
        capture_output=True,
        check=True,
        timeout=120,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=pathlib.Path, default=ROOT / "site")
    parser.add_argument("--install", action="store_true", help="apt-get install chromium")
    parser.add_argument(
        "--install-only", action="store_true", help="install chromium if missing, check nothing"
    )
    parser.add_argument("--screenshot", type=pathlib.Path, help="save PNGs of the pages here")
    args = parser.parse_args(argv)
    if args.install_only:
        chromium, reason = find_chromium(install=True)
        print(f"chromium: {chromium}" if chromium else f"chromium not installed: {reason}")
        return 0  # the check itself says it was skipped, and why
    site = args.site.resolve()
    if not (site / "index.html").is_file():
        print(f"no built site in {site}: run `uv run --group docs mkdocs build --strict`")
        return 1
    failures = []
    missing = missing_names(site)
    failures += [f"not in the API reference: {m}" for m in missing]
    print(f"API pages: {'every public name has its entry' if not missing else 'names missing'}")
    chromium, reason = find_chromium(args.install)
    if chromium is None:
        print(f"browser check skipped: {reason}")
    else:
        with serve(site) as base:
            for page, expected in PAGES:
                url = base + page.removesuffix("index.html")
                dom = rendered_dom(chromium, url)
                absent = [text for text in expected if text not in dom]
                failures += [f"{page}: the rendered page lacks {text!r}" for text in absent]
                print(f"{page}: {'rendered' if not absent else 'NOT rendered as expected'}")
                if args.screenshot:
                    args.screenshot.mkdir(parents=True, exist_ok=True)
                    png = args.screenshot / (page.replace("/", "_").removesuffix(".html") + ".png")
                    screenshot(chromium, url, png)
                    print(f"  screenshot: {png}")
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
