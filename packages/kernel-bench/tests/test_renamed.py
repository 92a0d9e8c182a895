"""Names of the last release that have a new name still work, warning with it."""

from __future__ import annotations

import re

import kernel_bench
import pytest


def test_platforms_warns_with_its_new_name_and_is_that_object():
    message = (
        "`kernel_bench.PLATFORMS` is now `kernel_bench.BACKEND_PLATFORMS` "
        "(`from kernel_bench import BACKEND_PLATFORMS`); the old name will be removed in the "
        "next minor release"
    )
    with pytest.warns(DeprecationWarning, match=re.escape(message)) as caught:
        value = kernel_bench.PLATFORMS
    assert value is kernel_bench.BACKEND_PLATFORMS == ("cpu", "gpu", "tpu")
    assert caught[0].filename == __file__
    assert "BACKEND_PLATFORMS" in kernel_bench.__all__ and "PLATFORMS" not in kernel_bench.__all__
