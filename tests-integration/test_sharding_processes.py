"""Kernels with a sharding rule under a sharded jit over two JAX processes.

Two processes on this machine, two CPU devices each, one global mesh of four
devices (jax.distributed, CPU collectives). A numba kernel and an
XLACustomKernel operation declared elementwise run on each device's shard: no
all-gather in the compiled program, each handler call sees a quarter of the
elements, the result keeps the inputs' sharding. A matvec with a reduction
factor sums its partial results across the processes. Both processes stop by
themselves, or are killed after the timeout.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

TIMEOUT_S = 240

_WORKER = r"""
import json, os, sys
process_id, port = int(sys.argv[1]), int(sys.argv[2])
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax
try:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
except AttributeError:
    pass
jax.distributed.initialize(
    coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process_id,
    initialization_timeout=120,
)
import jax.numpy as jnp, numba, numpy as np
from ffi_core import ShardingRule
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from numba_cpu_ffi import numba_kernel
from xla_custom_kernel import XLACustomKernel

@numba.njit
def add_counting(x, y, out, seen):
    for i in range(x.size):
        out[i] = x[i] + y[i]
        seen[i] = x.size

@numba.njit
def matvec(a, v, out):
    for i in range(a.shape[0]):
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[i, k] * v[k]
        out[i] = acc

n = 1024
mesh = Mesh(np.array(jax.devices()), ("d",))
host = np.arange(n, dtype=np.float32)
x = jax.make_array_from_callback((n,), NamedSharding(mesh, P("d")), lambda i: host[i])
report = {}
outs = (jax.ShapeDtypeStruct((n,), jnp.float32), jax.ShapeDtypeStruct((n,), jnp.int64))
for rule in (None, "elementwise"):
    f = jax.jit(numba_kernel(add_counting, outs, sharding_rule=rule))
    out, seen = f(x, x)
    for shard in out.addressable_shards:
        np.testing.assert_array_equal(shard.data, 2 * host[shard.index])
    report[str(rule)] = {
        "seen": sorted({int(v) for s in seen.addressable_shards for v in np.asarray(s.data)}),
        "all_gather": "all-gather" in f.lower(x, x).compile().as_text(),
        "spec": [e for e in out.sharding.spec if e is not None],
    }

op = XLACustomKernel("sharding_two_processes")
op.def_numba_kernel(lambda outs: add_counting)
op.def_sharding_rule("elementwise")
f = jax.jit(lambda x: op(x, x, outs=outs))
out, seen = f(x)
report["xla_custom_kernel"] = {
    "seen": sorted({int(v) for s in seen.addressable_shards for v in np.asarray(s.data)}),
    "all_gather": "all-gather" in f.lower(x).compile().as_text(),
}

# The reduction factor k split over the 4 devices, 2 in each process.
rows, cols = 8, 64
a_host = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols) / 100
v_host = np.arange(cols, dtype=np.float32) / 10
a = jax.make_array_from_callback((rows, cols), NamedSharding(mesh, P(None, "d")), lambda i: a_host[i])
v = jax.make_array_from_callback((cols,), NamedSharding(mesh, P("d")), lambda i: v_host[i])
rule = ShardingRule("i k, k -> i", reduction_factors=("k",))
g = jax.jit(numba_kernel(matvec, jax.ShapeDtypeStruct((rows,), jnp.float32), sharding_rule=rule))
y = g(a, v)
for shard in y.addressable_shards:
    np.testing.assert_allclose(shard.data, (a_host @ v_host)[shard.index], rtol=1e-5)
hlo = g.lower(a, v).compile().as_text()
report["reduction"] = {"all_reduce": "all-reduce" in hlo, "all_gather": "all-gather" in hlo}
print(json.dumps(report), flush=True)
jax.distributed.shutdown()
"""


def test_sharded_jit_over_two_processes(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    workers = [
        subprocess.Popen(
            [sys.executable, str(script), str(i), str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(2)
    ]
    reports = []
    try:
        for w in workers:
            out, err = w.communicate(timeout=TIMEOUT_S)
            assert w.returncode == 0, err[-3000:]
            reports.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for w in workers:
            w.kill()
    for report in reports:
        # Without a rule every device gathers the whole input and computes all of it.
        assert report["None"] == {"seen": [1024], "all_gather": True, "spec": []}
        # With one, each device computes its quarter, in both processes.
        assert report["elementwise"] == {
            "seen": [256],
            "all_gather": False,
            "spec": ["d"],
        }
        assert report["xla_custom_kernel"] == {"seen": [256], "all_gather": False}
        assert report["reduction"] == {"all_reduce": True, "all_gather": False}
