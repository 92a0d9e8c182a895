"""Names of the last release that have a new name still work, warning with it."""

from __future__ import annotations

import re

import pytest
import xla_custom_kernel as xck


@pytest.mark.parametrize(
    ("old", "new"), [("PLATFORMS", "BACKEND_PLATFORMS"), ("get_chooser", "find_chooser")]
)
def test_an_old_name_warns_with_its_new_name_and_is_that_object(old, new):
    message = (
        f"`xla_custom_kernel.{old}` is now `xla_custom_kernel.{new}` "
        f"(`from xla_custom_kernel import {new}`); the old name will be removed in the next "
        "minor release"
    )
    with pytest.warns(DeprecationWarning, match=re.escape(message)) as caught:
        value = getattr(xck, old)
    assert value is getattr(xck, new)
    assert caught[0].filename == __file__
    assert new in xck.__all__ and old not in xck.__all__


def test_backend_platforms_are_jax_backend_names():
    assert xck.BACKEND_PLATFORMS == ("cpu", "gpu", "tpu")


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(
        AttributeError,
        match=re.escape("module 'xla_custom_kernel' has no attribute 'no_such_name'"),
    ):
        xck.no_such_name  # noqa: B018
