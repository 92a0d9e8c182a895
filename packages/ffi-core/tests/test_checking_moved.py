"""ffi_core.checking: the names that moved to kernel-check forward there with a
DeprecationWarning, or say how to install kernel-check where it is missing."""

from __future__ import annotations

import importlib
import re
import sys
import warnings

import pytest

MOVED = (
    "CHECKS",
    "TOLERANCES",
    "CheckReport",
    "CheckResult",
    "Status",
    "check_kernel",
    "first_difference",
    "max_difference",
    "tolerance",
)


def _warning(name: str) -> str:
    return (
        f"`ffi_core.checking.{name}` is deprecated and will be removed in the next release: "
        f"import it from `kernel_check` (the kernel-check package): "
        f"`from kernel_check import {name}`"
    )


def test_importing_the_module_alone_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = importlib.import_module("ffi_core.checking")
    assert sorted(dir(module)) == sorted(MOVED)


@pytest.mark.parametrize("name", MOVED)
def test_each_moved_name_forwards_to_kernel_check_with_a_warning(name):
    kernel_check = pytest.importorskip("kernel_check")
    import ffi_core.checking

    with pytest.warns(DeprecationWarning, match=re.escape(_warning(name))) as record:
        value = getattr(ffi_core.checking, name)
    assert value is getattr(kernel_check, name)
    # The warning points at the line that asked for the name.
    assert record[0].filename == __file__


def test_from_import_forwards_and_warns():
    kernel_check = pytest.importorskip("kernel_check")
    with pytest.warns(DeprecationWarning, match=re.escape(_warning("check_kernel"))):
        from ffi_core.checking import check_kernel
    assert check_kernel is kernel_check.check_kernel


def test_an_unknown_name_is_an_attribute_error():
    import ffi_core.checking

    with pytest.raises(
        AttributeError,
        match=re.escape("module 'ffi_core.checking' has no attribute 'run_checks'"),
    ):
        ffi_core.checking.run_checks  # noqa: B018


def test_without_kernel_check_the_error_says_how_to_install_it(monkeypatch):
    import ffi_core.checking

    monkeypatch.setitem(sys.modules, "kernel_check", None)  # what an absent package raises
    message = (
        "`ffi_core.checking.check_kernel` moved to the kernel-check package, which is not "
        'installed: install it with `pip install "kernel-check"` (from wheels built from the '
        'repository: `pip install --find-links DIR "kernel-check"`; in a uv project: '
        '`uv add "kernel-check"`), then `from kernel_check import check_kernel`'
    )
    with (
        pytest.warns(DeprecationWarning, match=re.escape(_warning("check_kernel"))),
        pytest.raises(ImportError, match=f"^{re.escape(message)}$"),
    ):
        ffi_core.checking.check_kernel  # noqa: B018
