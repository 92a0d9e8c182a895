"""Fixtures of the xla-custom-kernel tests.

Kernel names are global to the process (and tests share one process, also under
pytest-xdist), so every test names its kernels with the ``name`` fixture.
"""

import re
import uuid

import pytest
import xla_custom_kernel as xck


@pytest.fixture(autouse=True)
def _reset_backend_preference():
    # A test that fails between set_backend(...) and set_backend(None) must not
    # change which backend the next test runs.
    xck.set_backend(None)
    yield
    xck.set_backend(None)


@pytest.fixture
def name(request):
    """A kernel name no other test uses: the test's name plus a random suffix."""
    base = re.sub(r"\W+", "_", request.node.name)
    return f"{base}_{uuid.uuid4().hex[:8]}"
