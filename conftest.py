"""Test set-up shared by the whole workspace: several CPU devices, so multi-device
code (pmap, shard_map) runs on one machine (set before jax initializes), and
the packages' disk caches in temporary folders."""

import os

_FLAG = "--xla_force_host_platform_device_count=4"
if _FLAG.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}".strip()

# Imported once XLA_FLAGS holds the device count: ffi_core imports jax.
from ffi_core.testing import cache_dir_fixture  # noqa: E402

#: Disk caches written by what the tests run: backend "auto"'s decisions, the
#: numba CPU handlers (compiled at lowering), the GPU bridges' compiled kernels,
#: the CUDA launcher's handlers and warp-ffi's CPU handlers.
_CACHE_DIRS = (
    "KERNEL_BENCH_AUTOTUNE_DIR",
    "NUMBA_CPU_FFI_CACHE_DIR",
    "NUMBA_CUDA_FFI_CACHE_DIR",
    "TRITON_FFI_CACHE_DIR",
    "CUDA_SOURCE_FFI_CACHE_DIR",
    "FFI_CORE_CUDA_HANDLER_CACHE_DIR",
    "WARP_FFI_HANDLER_CACHE_DIR",
)

# The tests and the tutorials they run (subprocesses inherit the environment)
# use fresh directories, never the user's caches.
_cache_dirs = cache_dir_fixture(*_CACHE_DIRS)
