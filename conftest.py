"""Test set-up shared by the whole workspace: several CPU devices, so multi-device
code (pmap, shard_map) runs on one machine. Must run before jax initializes."""

import os

_FLAG = "--xla_force_host_platform_device_count=4"
if _FLAG.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}".strip()
