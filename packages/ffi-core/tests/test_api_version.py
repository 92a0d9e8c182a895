from __future__ import annotations

import pathlib
import re

import ffi_core
import pytest
from ffi_core.abi import _api_version


def _header_define(text: str, name: str) -> int:
    match = re.search(rf"^#define\s+{name}\s+(\d+)\s*$", text, re.M)
    assert match is not None, f"{name} not found in c_api.h"
    return int(match.group(1))


def test_c_api_header_is_inside_jaxlib() -> None:
    import jaxlib

    header = ffi_core.abi.c_api_header()
    if header is None:
        pytest.skip("the installed jaxlib ships without xla/ffi/api/c_api.h")
    assert header.is_file()
    assert header.parts[-5:] == ("include", "xla", "ffi", "api", "c_api.h")
    assert any(pathlib.Path(root) in header.parents for root in jaxlib.__path__)


def test_api_version_matches_header() -> None:
    header = ffi_core.abi.c_api_header()
    if header is None:
        pytest.skip("the installed jaxlib ships without xla/ffi/api/c_api.h")
    text = header.read_text()
    major, minor = ffi_core.abi.api_version()
    assert type(major) is int and type(minor) is int
    assert (major, minor) == (
        _header_define(text, "XLA_FFI_API_MAJOR"),
        _header_define(text, "XLA_FFI_API_MINOR"),
    )


def test_api_version_without_header_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_api_version, "c_api_header", lambda: None)
    assert _api_version.api_version.__wrapped__() == (0, 1)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "#define XLA_FFI_API_MAJOR 0\n",
        "#define XLA_FFI_API_MINOR 7\n",
    ],
)
def test_api_version_with_incomplete_header_falls_back(
    text: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    header = tmp_path / "c_api.h"
    header.write_text(text)
    monkeypatch.setattr(_api_version, "c_api_header", lambda: header)
    assert _api_version.api_version.__wrapped__() == (0, 1)


def test_api_version_parses_header(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header = tmp_path / "c_api.h"
    header.write_text("#define XLA_FFI_API_MAJOR 1\n#define XLA_FFI_API_MINOR 12\n")
    monkeypatch.setattr(_api_version, "c_api_header", lambda: header)
    assert _api_version.api_version.__wrapped__() == (1, 12)
