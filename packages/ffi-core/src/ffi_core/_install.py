"""How an error message says to install a package or an extra: one wording
for every package, right before and after the packages are on PyPI."""

from __future__ import annotations

__all__ = ["install_hint", "missing"]


def install_hint(requirement: str) -> str:
    """``install it with `pip install "<requirement>"` ...``: the pip command,
    the same from wheels built from the repository (``--find-links``), and uv's.

    Example:
        >>> print(install_hint("ffi-core[native]"))
        install it with `pip install "ffi-core[native]"` (from wheels built from the repository: `pip install --find-links DIR "ffi-core[native]"`; in a uv project: `uv add "ffi-core[native]"`)
    """
    quoted = f'"{requirement}"'
    return (
        f"install it with `pip install {quoted}` (from wheels built from the repository: "
        f"`pip install --find-links DIR {quoted}`; in a uv project: `uv add {quoted}`)"
    )


def missing(module: str, *, needed_by: str, requirement: str) -> ImportError:
    """The ImportError to raise (``from`` the original) where ``module`` is
    not installed: ``needed_by`` needs it, and how to install ``requirement``.

    Example:
        >>> print(missing("numba", needed_by="ffi_core.abi.native", requirement="ffi-core[native]"))  # doctest: +ELLIPSIS
        ffi_core.abi.native needs numba: install it with `pip install "ffi-core[native]"` ...
    """
    return ImportError(f"{needed_by} needs {module}: {install_hint(requirement)}")
