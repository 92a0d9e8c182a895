"""Helpers for the tests of ffi-core and the packages built on it: one copy
of what each package's tests would otherwise carry.

- :func:`raises_exactly` / :func:`whole_message`: an error's whole message.
- :func:`check_differentiation_refused`, :func:`differentiation_refused_message`:
  a bridge kernel without a derivative refuses each transform in
  :data:`DIFFERENTIATION_TRANSFORMS` naming the kernel and the fix.
- :func:`check_docstring_examples`, :func:`package_modules`,
  :func:`readme_python_blocks`: the examples in docstrings and READMEs run.
- :func:`cache_dir_fixture`: caches in temporary folders during tests.
- :class:`BridgeUnderTest`, :func:`conformance_tests`: the checks every
  bridge passes (names, compile error, vmap methods, dtype messages,
  differentiation refused, cache kept out of the user's), run by each
  bridge's tests over a description of itself.
- :func:`device_mesh`, :func:`custom_calls`: a mesh over several devices, and
  the FFI calls a compiled sharded function makes.

The emulated GPU and its fixture are in :mod:`ffi_core.bridge.cuda.testing`.
pytest is imported only by the helpers that use it, so importing this
module adds no dependency beyond ffi-core's own.

Example:
    >>> from ffi_core.testing import raises_exactly
    >>> with raises_exactly(TypeError, "`n` must be an int, got str"):
    ...     raise TypeError("`n` must be an int, got str")
"""

from ._conformance import BridgeUnderTest as BridgeUnderTest
from ._conformance import conformance_tests as conformance_tests
from ._docstrings import check_docstring_examples as check_docstring_examples
from ._docstrings import package_modules as package_modules
from ._docstrings import readme_python_blocks as readme_python_blocks
from ._fixtures import cache_dir_fixture as cache_dir_fixture
from ._messages import DIFFERENTIATION_TRANSFORMS as DIFFERENTIATION_TRANSFORMS
from ._messages import check_differentiation_refused as check_differentiation_refused
from ._messages import differentiation_refused_message as differentiation_refused_message
from ._messages import raises_exactly as raises_exactly
from ._messages import whole_message as whole_message
from ._sharding import custom_calls as custom_calls
from ._sharding import device_mesh as device_mesh

__all__ = [
    "DIFFERENTIATION_TRANSFORMS",
    "BridgeUnderTest",
    "cache_dir_fixture",
    "check_differentiation_refused",
    "check_docstring_examples",
    "conformance_tests",
    "custom_calls",
    "device_mesh",
    "differentiation_refused_message",
    "package_modules",
    "raises_exactly",
    "readme_python_blocks",
    "whole_message",
]
