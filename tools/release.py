"""Release a package: bump its version, date its CHANGELOG, check its dependents.

Each package's version lives in one place, `src/<import_name>/_version.py`
(hatchling reads it for the wheel). Release notes are the CHANGELOG's sections.

    uv run python tools/release.py bump ffi-core patch             # 0.1.0 -> 0.1.1
    uv run python tools/release.py bump ffi-core minor --dry-run   # say what would change
    uv run python tools/release.py bump ffi-core patch --date 2026-03-04   # date it yourself
    uv run python tools/release.py notes ffi-core [0.1.1]          # a release's notes
    uv run python tools/release.py check                           # every range admits its package

`bump` refuses (exit 1, nothing written) when the CHANGELOG's Unreleased section
is empty, or when a sibling's requirement (`ffi-core>=0.1,<0.2` in its
pyproject.toml) would not admit the new version: raise that sibling's range
first, in the same change. Otherwise it writes `_version.py`, moves the
Unreleased entries under `## <version> (<today or --date>)` with a fresh empty
`## Unreleased` above, and marks the package's api.txt as the released API.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import pathlib
import re
import sys
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = pathlib.Path(__file__).resolve().parents[1]
PARTS = ("major", "minor", "patch")
UNRELEASED = "## Unreleased"
# "## Unreleased" or "## 0.1.0 (unreleased)": entries not yet in a release.
_UNRELEASED_HEADING = re.compile(r"^## +(unreleased\b.*|\S+ +\(unreleased\))\s*$", re.IGNORECASE)
_VERSION_LINE = re.compile(r'^__version__[ \t]*=[ \t]*"([^"]+)"[ \t]*$', re.MULTILINE)


class ReleaseError(Exception):
    """A release that must not happen; the message says why and what to do."""


def import_name(package: str) -> str:
    return package.replace("-", "_")


def packages(root: pathlib.Path) -> list[str]:
    return sorted(p.name for p in (root / "packages").iterdir() if (p / "pyproject.toml").is_file())


def version_file(root: pathlib.Path, package: str) -> pathlib.Path:
    return root / "packages" / package / "src" / import_name(package) / "_version.py"


def read_version(root: pathlib.Path, package: str) -> Version:
    path = version_file(root, package)
    match = _VERSION_LINE.search(path.read_text())
    if match is None:
        raise ReleaseError(f'{path.relative_to(root)} has no `__version__ = "..."` line')
    return Version(match.group(1))


def bumped(version: Version, part: str) -> Version:
    """`version` with `part` ("major", "minor" or "patch") raised and the parts after it zeroed."""
    if part not in PARTS:
        raise ValueError(f"`part` must be one of {PARTS}, got {part!r}")
    major, minor, patch = (*version.release, 0, 0, 0)[:3]
    if part == "major":
        return Version(f"{major + 1}.0.0")
    if part == "minor":
        return Version(f"{major}.{minor + 1}.0")
    return Version(f"{major}.{minor}.{patch + 1}")


# --- CHANGELOG --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Changelog:
    """A CHANGELOG.md split at its `## ` headings."""

    preamble: list[str]  # the title and anything before the first section
    sections: list[tuple[str, list[str]]]  # (heading line, body lines)

    @classmethod
    def parse(cls, text: str) -> Changelog:
        preamble: list[str] = []
        sections: list[tuple[str, list[str]]] = []
        for line in text.splitlines():
            if line.startswith("## "):
                sections.append((line, []))
            elif sections:
                sections[-1][1].append(line)
            else:
                preamble.append(line)
        return cls(preamble, sections)

    def unreleased_count(self) -> int:
        """How many leading sections are unreleased ones."""
        count = 0
        for heading, _ in self.sections:
            if not _UNRELEASED_HEADING.match(heading):
                break
            count += 1
        return count

    def unreleased(self) -> list[str]:
        """The entries not yet in a release, blank lines at the ends dropped."""
        lines: list[str] = []
        for _, body in self.sections[: self.unreleased_count()]:
            entries = _strip_blank(body)
            if entries:
                lines += ([""] if lines else []) + entries
        return lines

    def released(self, version: str) -> list[str] | None:
        for heading, body in self.sections:
            if re.match(rf"^## +{re.escape(version)}(\s|$)", heading) and not (
                _UNRELEASED_HEADING.match(heading)
            ):
                return _strip_blank(body)
        return None

    def release(self, version: Version, date: datetime.date) -> str:
        """The text with the unreleased entries under `## <version> (<date>)`."""
        rest = self.sections[self.unreleased_count() :]
        out = [*_strip_blank(self.preamble), "", UNRELEASED, ""]
        out += [f"## {version} ({date.isoformat()})", "", *self.unreleased(), ""]
        for heading, body in rest:
            out += [heading, *body]
        return "\n".join(_strip_blank(out)) + "\n"


def _strip_blank(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def changelog(root: pathlib.Path, package: str) -> Changelog:
    return Changelog.parse((root / "packages" / package / "CHANGELOG.md").read_text())


# --- dependents -------------------------------------------------------------------


def requirements_on(root: pathlib.Path, package: str) -> list[tuple[str, str, Requirement]]:
    """Every (dependent, requirement as written, requirement) in the workspace's
    pyproject.toml files that names `package`, from dependencies and optional
    dependencies alike."""
    wanted = canonicalize_name(package)
    found = []
    for dependent in packages(root):
        project = tomllib.loads((root / "packages" / dependent / "pyproject.toml").read_text())[
            "project"
        ]
        lists = [project.get("dependencies", [])]
        lists += project.get("optional-dependencies", {}).values()
        for written in (r for deps in lists for r in deps):
            requirement = Requirement(written)
            if canonicalize_name(requirement.name) == wanted:
                found.append((dependent, written, requirement))
    return found


def refusing(root: pathlib.Path, package: str, version: Version) -> list[str]:
    """One line per dependent whose requirement does not admit `version`."""
    return [
        f"{dependent} requires `{written}` (packages/{dependent}/pyproject.toml)"
        for dependent, written, requirement in requirements_on(root, package)
        if not requirement.specifier.contains(version, prereleases=True)
    ]


# --- commands ---------------------------------------------------------------------


def bump(
    root: pathlib.Path,
    package: str,
    part: str,
    *,
    dry_run: bool = False,
    today: datetime.date | None = None,
) -> list[str]:
    """Release `package` with its `part` raised; return what was (or would be) done.

    Raises:
        ReleaseError: the package is unknown, its CHANGELOG has no unreleased entry,
            or a dependent's range does not admit the new version. Nothing is written.
    """
    if package not in packages(root):
        raise ReleaseError(f"`package` must be one of {packages(root)}, got {package!r}")
    old = read_version(root, package)
    new = bumped(old, part)
    log = changelog(root, package)
    if not log.unreleased():
        raise ReleaseError(
            f"{package}: nothing to release: the Unreleased section of "
            f"packages/{package}/CHANGELOG.md is empty"
        )
    refused = refusing(root, package, new)
    if refused:
        raise ReleaseError(
            f"{package} {new} would break its dependents' ranges: "
            + "; ".join(refused)
            + f". Raise their upper bound to admit {new} (and add a CHANGELOG entry to each) "
            "before releasing."
        )
    date = today or datetime.date.today()
    done = [
        f"{version_file(root, package).relative_to(root)}: {old} -> {new}",
        f"packages/{package}/CHANGELOG.md: {len(log.unreleased())} unreleased line(s) "
        f"under `## {new} ({date.isoformat()})`",
    ]
    snapshot = root / "packages" / package / "api.txt"
    if snapshot.exists():
        done.append(f"{snapshot.relative_to(root)}: version {new}, marked as released")
    ranges = requirements_on(root, package)
    done += [f"{d} requires `{w}`: admits {new}" for d, w, _ in ranges]
    if dry_run:
        return done
    path = version_file(root, package)
    path.write_text(_VERSION_LINE.sub(f'__version__ = "{new}"', path.read_text(), count=1))
    (root / "packages" / package / "CHANGELOG.md").write_text(log.release(new, date))
    if snapshot.exists():
        snapshot.write_text(mark_released(snapshot.read_text(), str(new)))
    return done


def mark_released(text: str, version: str) -> str:
    """An api.txt whose header says `version` and whose released digest is its body's
    (the digest tools/api_snapshot.py takes: sha256 of what follows the header)."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    body = "".join(lines[start:]).lstrip("\n")
    released = hashlib.sha256(body.encode()).hexdigest()[:16]
    header = []
    for line in lines[:start]:
        if line.startswith("# version: "):
            line = f"# version: {version}\n"
        elif line.startswith("# released-digest: "):
            line = f"# released-digest: {released}\n"
        header.append(line)
    return "".join(header + lines[start:])


def notes(root: pathlib.Path, package: str, version: str | None = None) -> str:
    """The release notes of `version` (default: the current one) from the CHANGELOG."""
    version = version or str(read_version(root, package))
    body = changelog(root, package).released(version)
    if body is None:
        raise ReleaseError(f"packages/{package}/CHANGELOG.md has no section for {version}")
    return "\n".join(body)


def check(root: pathlib.Path) -> list[str]:
    """One line per requirement in the workspace that does not admit its package's
    current version."""
    return [
        line
        for package in packages(root)
        for line in refusing(root, package, read_version(root, package))
    ]


def _iso_date(text: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"`--date` must be a date as YYYY-MM-DD, got {text!r}"
        ) from None


def main(argv: list[str] | None = None, root: pathlib.Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    bump_parser = commands.add_parser("bump", help="release a package with a new version")
    bump_parser.add_argument("package", choices=packages(root))
    bump_parser.add_argument("part", choices=PARTS)
    bump_parser.add_argument("--dry-run", action="store_true", help="write nothing")
    bump_parser.add_argument(
        "--date",
        type=_iso_date,
        help="the release's date in the CHANGELOG, YYYY-MM-DD (default: today)",
    )
    notes_parser = commands.add_parser("notes", help="print a release's notes")
    notes_parser.add_argument("package", choices=packages(root))
    notes_parser.add_argument("version", nargs="?")
    commands.add_parser("check", help="check every range admits its package's version")
    args = parser.parse_args(argv)
    try:
        if args.command == "bump":
            done = bump(root, args.package, args.part, dry_run=args.dry_run, today=args.date)
            print(("would do (dry run):" if args.dry_run else "done:") + "\n  " + "\n  ".join(done))
        elif args.command == "notes":
            print(notes(root, args.package, args.version))
        else:
            problems = check(root)
            print("\n".join(problems) or "every range admits its package's current version")
            return 1 if problems else 0
    except ReleaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
