"""Tutorial 4: numba kernels in a program that spans several processes.

Run it: ``uv run python docs/multi_process.py``. It starts two copies of itself
on this machine, each a JAX process with two CPU devices, joined by JAX's own
distribution (``jax.distributed.initialize``, CPU collectives over gloo): one
program over four devices in two processes. Every step asserts its result, so
this file doubles as a test (CI runs it); the processes stop by themselves, or
are killed after ``TIMEOUT_S``.

Nothing here is specific to this project: a numba kernel is an XLA operation
like any other, so ``shard_map`` runs it on each process's shards and JAX's
collectives (``psum`` below) cross the process boundary. Step 4 drops
``shard_map``: under a plain ``jax.jit`` with sharded inputs, a kernel without
a ``sharding_rule`` makes every device gather the whole array and compute all
of it (an ``all-gather`` in the compiled program); with
``sharding_rule="elementwise"`` each device computes its own shard, and the
result keeps the inputs' sharding. On several machines,
give every process the coordinator's address, the number of processes and its
own id, exactly as here. Step 5, back in the launching process, checks the ops
with ``check_kernel`` (Tutorial 8).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import numba

N_PROCESSES = 2
DEVICES_PER_PROCESS = 2
TIMEOUT_S = 240

# --- The kernels: the workers run them, this process checks them -----------
# (numba does not import jax, so the workers can still set XLA_FLAGS first.)


@numba.njit
def square(x, out):
    for i in range(x.size):
        out[i] = x[i] * x[i]


@numba.njit
def square_counting(x, out, seen):
    for i in range(x.size):
        out[i] = x[i] * x[i]
        seen[i] = x.size  # how many elements this call of the kernel saw


def worker(process_id: int, port: int) -> None:
    # Before jax is imported: this process's own CPU devices.
    os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={DEVICES_PER_PROCESS}"
    import jax

    try:  # gloo: JAX's cross-process collectives on CPU (an option some jax versions lack)
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    except AttributeError:
        pass
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=N_PROCESSES,
        process_id=process_id,
        initialization_timeout=TIMEOUT_S // 2,
    )
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P
    from numba_cpu_ffi import numba_kernel

    # --- 1. Every process sees every device; it owns two ------------------
    n_devices = N_PROCESSES * DEVICES_PER_PROCESS
    assert len(jax.devices()) == n_devices
    assert len(jax.local_devices()) == DEVICES_PER_PROCESS

    # --- 2. A numba kernel on each shard, a sum across processes ---------
    n = 16
    per_shard = n // n_devices
    square_op = numba_kernel(square, jax.ShapeDtypeStruct((per_shard,), jnp.float32))
    mesh = Mesh(np.array(jax.devices()), ("d",))

    def sum_of_squares(x):
        # square_op runs where the shard lives; psum adds the four partial sums,
        # two of them from the other process.
        return jax.lax.psum(square_op(x).sum(), "d")

    f = jax.jit(jax.shard_map(sum_of_squares, mesh=mesh, in_specs=P("d"), out_specs=P()))
    host = np.arange(n, dtype=np.float32)
    # Each process supplies only its own shards of the global array.
    x = jax.make_array_from_callback((n,), NamedSharding(mesh, P("d")), lambda i: host[i])
    total = float(f(x).addressable_data(0))
    assert total == float((host**2).sum()), total

    # --- 3. The same array, squared in place of its shards ----------------
    g = jax.jit(jax.shard_map(square_op, mesh=mesh, in_specs=P("d"), out_specs=P("d")))
    squared = g(x)
    for shard in squared.addressable_shards:
        np.testing.assert_array_equal(shard.data, host[shard.index] ** 2)

    # --- 4. No shard_map: jit with sharded inputs, without and with a rule --
    outs = (jax.ShapeDtypeStruct((n,), jnp.float32), jax.ShapeDtypeStruct((n,), jnp.int32))
    seen_by_rule = {}
    for rule, seen_per_call, gathered in ((None, n, True), ("elementwise", per_shard, False)):
        h = jax.jit(numba_kernel(square_counting, outs, sharding_rule=rule))
        squared, seen = h(x)
        for shard in squared.addressable_shards:
            np.testing.assert_array_equal(shard.data, host[shard.index] ** 2)
        # Every call of the kernel, on every device of both processes, saw
        # the whole array (no rule) or its own quarter (the rule).
        for shard in seen.addressable_shards:
            assert (np.asarray(shard.data) == seen_per_call).all()
        hlo = h.lower(x).compile().as_text()
        assert ("all-gather" in hlo) == gathered, rule
        # The kernel's operand in the compiled program: f32[16] or f32[4].
        assert f"f32[{seen_per_call}]" in next(
            line for line in hlo.splitlines() if "custom_call_target" in line
        )
        replicated = squared.sharding.is_fully_replicated
        assert replicated == (rule is None), squared.sharding
        seen_by_rule[rule] = f"{seen_per_call} elements per call" + (
            ", after an all-gather" if gathered else ""
        )
    print(
        f"process {process_id}: no rule: {seen_by_rule[None]}; "
        f"elementwise: {seen_by_rule['elementwise']}",
        flush=True,
    )

    print(f"process {process_id}: sum of squares {total:.0f}, shards checked", flush=True)
    jax.distributed.shutdown()


def check_ops() -> None:
    # --- 5. Back in this process: the ops checked with check_kernel --------
    # (Tutorial 8): eager vs jit vs a reference, vmap, compile counts,
    # threads, bad inputs and, where this process has several CPU devices,
    # the "elementwise" rule under a sharded jit and shard_map. Here only:
    # the workers run the ops, they do not check them. jax is imported here,
    # not at the top: a worker imports this file and sets XLA_FLAGS first.
    import jax
    import jax.numpy as jnp
    import numpy as np
    from kernel_check import Status, check_kernel
    from numba_cpu_ffi import numba_kernel

    x = np.arange(16, dtype=np.float32)
    skip = {
        # The kernels' module is this file, run as __main__.
        "export": "the tutorial runs as __main__, which a fresh process cannot import",
    }

    # The ops as call functions: their `outs` follow the input (inside
    # shard_map an op sees its shard, not the whole array), and they refuse
    # what the kernels cannot take (they index x[i] for i < x.size: vectors).
    def vector_outs(x, *dtypes):
        if x.ndim != 1:
            raise ValueError(f"input 0 (`x`) must be a vector, got shape {x.shape}")
        return tuple(jax.ShapeDtypeStruct(x.shape, dtype) for dtype in dtypes)

    def square_op(x):
        (outs,) = vector_outs(x, x.dtype)
        return numba_kernel(square, outs, sharding_rule="elementwise")(x)

    def counting_op(x):
        outs = vector_outs(x, x.dtype, jnp.int32)
        return numba_kernel(square_counting, outs, sharding_rule="elementwise")(x)

    reports = [
        check_kernel(
            square_op,
            x,
            reference=lambda x: x * x,
            sharding_rule="elementwise",
            skip=skip,
        ),
        check_kernel(
            counting_op,
            x,
            reference=lambda x: (x * x, np.full(x.shape, x.size, np.int32)),
            skip={
                **skip,
                # `seen` counts the elements one call sees: a shard's, by design.
                "sharding": "`seen` is the size of each call's shard, which sharding changes",
            },
        ),
    ]
    for report in reports:
        families = {row.family for row in report.passed}
        assert {"results", "vmap", "compile", "threads", "bad_inputs"} <= families, report
        print(report.summary())
    sharding = [row for row in reports[0].results if row.family == "sharding"]
    if len(jax.devices("cpu")) > 1:
        assert all(row.status is Status.PASSED for row in sharding), reports[0]
    else:
        print(f"sharding: skipped ({sharding[0].detail})")


def main() -> None:
    with socket.socket() as s:  # a free port for the coordinator
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "worker", str(i), str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(N_PROCESSES)
    ]
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=TIMEOUT_S)
            outputs.append(out)
    finally:
        for proc in procs:
            proc.kill()
    for i, (proc, out) in enumerate(zip(procs, outputs, strict=True)):
        assert proc.returncode == 0, f"process {i} failed:\n{out}"
        assert f"process {i}: sum of squares 1240, shards checked" in out, out
        print("\n".join(out.strip().splitlines()[-2:]))
    check_ops()
    print("all steps passed")


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        worker(int(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
