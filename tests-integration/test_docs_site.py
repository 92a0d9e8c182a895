"""tools/check_docs_site.py's first check, on a made-up site: every public name an
api.txt lists must have its entry (an element with that id) in its API page."""

import importlib.util
import pathlib

TOOLS = pathlib.Path(__file__).resolve().parents[1] / "tools"
spec = importlib.util.spec_from_file_location("check_docs_site", TOOLS / "check_docs_site.py")
check_docs_site = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_docs_site)


def test_public_names_are_the_top_level_lines_of_a_snapshot(tmp_path):
    snapshot = tmp_path / "api.txt"
    snapshot.write_text(
        "# version: 0.1.0\n\n[pkg]\nclass pkg.Thing(ValueError)\n    (x: 'int')\n"
        "    .method(self)\ndef pkg.run(x, *, y=1)\npkg.LIMIT: int\nmodule pkg.sub\n"
        "pkg.Alias = collections.abc.Callable[[int], int]\n"
    )
    assert check_docs_site.public_names(snapshot) == [
        "pkg.Thing",
        "pkg.run",
        "pkg.LIMIT",
        "pkg.sub",
        "pkg.Alias",
    ]


def test_a_name_without_an_entry_is_reported(tmp_path):
    for snapshot in sorted(check_docs_site.ROOT.glob("packages/*/api.txt")):
        names = check_docs_site.public_names(snapshot)
        if snapshot.parent.name == "numba-cpu-ffi":
            names.remove("numba_cpu_ffi.numba_kernel")
        page = tmp_path / "api" / snapshot.parent.name / "index.html"
        page.parent.mkdir(parents=True)
        page.write_text("".join(f'<h2 id="{n}">{n}</h2>' for n in names))
    assert check_docs_site.missing_names(tmp_path) == ["numba-cpu-ffi: numba_cpu_ffi.numba_kernel"]
