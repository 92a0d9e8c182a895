"""Test set-up shared by the whole workspace: several CPU devices, so multi-device
code (pmap, shard_map) runs on one machine. Must run before jax initializes."""

import os

import pytest

_FLAG = "--xla_force_host_platform_device_count=4"
if _FLAG.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}".strip()


#: Disk caches written by what the tests run: backend "auto"'s decisions and
#: the GPU bridges' compiled kernels.
_CACHE_DIRS = (
    "KERNEL_BENCH_AUTOTUNE_DIR",
    "NUMBA_CUDA_FFI_CACHE_DIR",
    "TRITON_FFI_CACHE_DIR",
    "CUDA_SOURCE_FFI_CACHE_DIR",
)


@pytest.fixture(autouse=True, scope="session")
def _cache_dirs(tmp_path_factory):
    # The tests and the tutorials they run (subprocesses inherit the
    # environment) use fresh directories, never the user's caches.
    with pytest.MonkeyPatch.context() as mp:
        for env in _CACHE_DIRS:
            mp.setenv(env, str(tmp_path_factory.mktemp(env.lower())))
        yield
