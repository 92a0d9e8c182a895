"""Old names that warn and forward for one release."""

import re

import numba_cpu_ffi
import pytest
from ffi_core.bridge.cpu import cpu_call_p


def test_numba_kernel_call_p_is_cpu_call_p_with_a_warning():
    message = (
        "numba_cpu_ffi.numba_kernel_call_p is ffi_core.bridge.cpu.cpu_call_p; import it "
        "from there (numba_kernel_call_p goes away in the next minor release)"
    )
    with pytest.warns(DeprecationWarning, match=re.escape(message)):
        assert numba_cpu_ffi.numba_kernel_call_p is cpu_call_p


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(
        AttributeError, match=re.escape("module 'numba_cpu_ffi' has no attribute 'nope'")
    ):
        numba_cpu_ffi.nope  # noqa: B018
