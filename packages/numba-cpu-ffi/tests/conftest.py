"""Tests compile handlers into a fresh cache directory, never the user's."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _numba_cpu_ffi_cache_dir(tmp_path_factory):
    # Handlers compile at lowering, which happens in tests; none compiles at import.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_CPU_FFI_CACHE_DIR", str(tmp_path_factory.mktemp("numba-cpu-ffi-cache")))
        yield
