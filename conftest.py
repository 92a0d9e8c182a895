"""Test set-up shared by the whole workspace: several CPU devices, so multi-device
code (pmap, shard_map) runs on one machine. Must run before jax initializes."""

import os

import pytest

_FLAG = "--xla_force_host_platform_device_count=4"
if _FLAG.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}".strip()


@pytest.fixture(autouse=True, scope="session")
def _autotune_cache_dir(tmp_path_factory):
    # Backend "auto" keeps its decisions on disk: the tests and the tutorials
    # they run (subprocesses inherit the environment) use a fresh directory,
    # never the user's cache.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNEL_BENCH_AUTOTUNE_DIR", str(tmp_path_factory.mktemp("autotune-cache")))
        yield
