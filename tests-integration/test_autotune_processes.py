"""Backend "auto" in a program of two JAX processes: both make process 0's choice.

Each process times the backends differently (the fast one in process 0 is the
slow one in process 1, and each has its own cache on disk), so a choice made
locally would differ; process 0 decides and shares its decision through JAX's
key-value store, and both lower the program with the same backend.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

_WORKER = r"""
import json, os, sys, time
process_id, port, cache = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
os.environ["KERNEL_BENCH_AUTOTUNE_DIR"] = cache
import jax
jax.distributed.initialize(
    coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process_id,
    initialization_timeout=120,
)
import jax.numpy as jnp, numpy as np
import xla_custom_kernel as xck
from kernel_bench import autotune

def sleeping(seconds):
    def host(x):
        time.sleep(seconds)
        return np.asarray(x) * 2
    return lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

# Process 0 finds "b" fast; process 1 would find "a" fast.
costs = {"a": 2e-3, "b": 0.0} if process_id == 0 else {"a": 0.0, "b": 2e-3}
op = xck.XLACustomKernel("autotune_two_processes")
for name, cost in costs.items():
    op.def_kernel(name, "cpu", lambda outs, cost=cost: sleeping(cost) if cost else (lambda x: 2 * x))
autotune.set_budget(0.05)
x = jax.device_put(jnp.arange(8, dtype=jnp.float32), jax.local_devices()[0])
with autotune.recording() as found:
    y = jax.jit(lambda x: op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), backend="auto"))(x)
assert np.array_equal(np.asarray(y), 2 * np.arange(8)), y
local = {c.backend: c.us_per_call for c in found[0].candidates}
print(json.dumps({"choice": found[0].backend, "source": found[0].source, "times": local}))
jax.distributed.shutdown()
"""


def test_two_processes_make_the_same_choice(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), str(i), str(port), str(tmp_path / f"cache{i}")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(2)
    ]
    results = []
    for w in workers:
        try:
            out, err = w.communicate(timeout=300)
        finally:
            w.kill()
        assert w.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    first, second = results
    assert (first["choice"], first["source"]) == ("b", "measured")
    assert (second["choice"], second["source"]) == ("b", "process 0")
    # Process 1 received process 0's measurements, where "b" was the fast one.
    assert second["times"]["b"] < second["times"]["a"]
    # Process 1 measured nothing: its cache directory was never written.
    assert not (tmp_path / "cache1").exists()
    assert any((tmp_path / "cache0").glob("cpu-*.json"))
