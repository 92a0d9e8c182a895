"""The FFI API version to report in the metadata handshake.

XLA refuses a handler whose reported version it does not support, so the
version is read from the ``c_api.h`` that ships inside the installed jaxlib:
the exact version that jaxlib was built with, and therefore one it accepts.
"""

from __future__ import annotations

import functools
import pathlib
import re

__all__ = ["api_version", "c_api_header"]

# The version every jaxlib in the supported range (0.10 and newer) accepts;
# used only when a jaxlib ships without its headers.
_FALLBACK_VERSION = (0, 1)


def c_api_header() -> pathlib.Path | None:
    """Path of ``xla/ffi/api/c_api.h`` inside the installed jaxlib, or None."""
    import jaxlib

    for root in map(pathlib.Path, jaxlib.__path__):
        header = root / "include" / "xla" / "ffi" / "api" / "c_api.h"
        if header.is_file():
            return header
    return None


@functools.cache
def api_version() -> tuple[int, int]:
    """``(major, minor)`` of the XLA FFI API of the installed jaxlib.

    Example:
        >>> major, minor = api_version()
        >>> major
        0
    """
    header = c_api_header()
    if header is None:
        return _FALLBACK_VERSION
    text = header.read_text()
    major = re.search(r"#define\s+XLA_FFI_API_MAJOR\s+(\d+)", text)
    minor = re.search(r"#define\s+XLA_FFI_API_MINOR\s+(\d+)", text)
    if major is None or minor is None:
        return _FALLBACK_VERSION
    return int(major.group(1)), int(minor.group(1))
