"""Tests compile handlers into a fresh cache directory, never the user's."""

from ffi_core.testing import cache_dir_fixture

# Handlers compile at lowering, which happens in tests; none compiles at import.
_numba_cpu_ffi_cache_dir = cache_dir_fixture("NUMBA_CPU_FFI_CACHE_DIR")
