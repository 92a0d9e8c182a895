"""ffi_core.abi.native without numba: an ImportError that names the install command."""

from __future__ import annotations

import subprocess
import sys

_PROBE = """
import sys
sys.modules["numba"] = None  # what Python does for a package that is not installed
import ffi_core
try:
    import ffi_core.abi.native
except ImportError as exc:
    print(type(exc.__cause__).__name__)
    print(exc)
"""


def test_native_without_numba_names_the_extra() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines() == [
        "ModuleNotFoundError",
        'ffi_core.abi.native needs numba: install it with `pip install "ffi-core[native]"` (from '
        'wheels built from the repository: `pip install --find-links DIR "ffi-core[native]"`; '
        'in a uv project: `uv add "ffi-core[native]"`)',
    ]


def test_core_does_not_import_numba() -> None:
    code = "import sys, ffi_core; print('numba' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False", "importing ffi_core must not import numba"
