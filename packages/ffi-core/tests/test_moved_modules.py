"""The old paths of moved modules warn, naming the new place, and forward."""

import importlib
import re

import ffi_core.bridge.cpu
import ffi_core.bridge.cuda
import ffi_core.bridge.cuda.testing
import pytest

MOVED = [
    ("ffi_core.cpu", ffi_core.bridge.cpu),
    ("ffi_core.cuda", ffi_core.bridge.cuda),
    ("ffi_core.cuda.testing", ffi_core.bridge.cuda.testing),
]


@pytest.mark.parametrize(("old", "new"), MOVED)
def test_every_old_name_warns_and_forwards(old, new):
    shim = importlib.import_module(old)
    assert shim.__moved_to__ == new.__name__
    for name in shim.__all__:
        target = shim._NAMES[name]
        message = (
            f"{old}.{name} moved to {new.__name__}.{target}; import it from there "
            f"({old} goes away in the next minor release)"
        )
        with pytest.warns(DeprecationWarning, match=re.escape(message)):
            value = getattr(shim, name)
        assert value is getattr(new, target)


def test_an_unknown_name_of_a_shim_is_an_attribute_error():
    shim = importlib.import_module("ffi_core.cpu")
    with pytest.raises(
        AttributeError, match=re.escape("module 'ffi_core.cpu' has no attribute 'nope'")
    ):
        shim.nope  # noqa: B018


def test_from_import_of_an_old_path_warns():
    with pytest.warns(
        DeprecationWarning, match=re.escape("ffi_core.cuda.testing.emulate moved to")
    ):
        from ffi_core.cuda.testing import emulate
    assert emulate is ffi_core.bridge.cuda.testing.emulate


def test_a_launch_plan_without_its_spec_is_refused():
    from ffi_core.bridge.cuda import LaunchPlan, LayoutBuilder, ensure_target, launch_config

    plan = LaunchPlan(
        "test.k", ("00",), LayoutBuilder().build(), launch_config(grid=1, block=1), lambda cc: b""
    )
    with pytest.raises(
        ValueError, match=re.escape("test.k: `plan.spec` is None; lower_launch sets it")
    ):
        ensure_target(plan)


def test_the_wrong_platform_error_is_both_former_types():
    from ffi_core.bridge import WrongPlatformError

    assert issubclass(WrongPlatformError, NotImplementedError)
    assert issubclass(WrongPlatformError, RuntimeError)
