"""Tutorial 9: what a sharding rule splits, shown on a sparse (CSR) operation.

Run it: ``uv run python docs/sharding.py``. It runs on four CPU devices of one
process. Every step asserts its result, so this file doubles as a test (CI
runs it).

A sharding rule names one *factor* per dimension of each input and output:
``"nnz, nnz, ptr, n -> m"`` for ``y = A @ v`` with ``A`` in CSR form (values
and column indices of length ``nnz``, row pointers of length ``m + 1``, a
vector of length ``n``; a result of length ``m``). Under a sharded
``jax.jit``, each factor is either *split* (every device gets its part of
each array with that factor, and the kernel runs on the parts) or kept
*whole* (the arrays are gathered along it). Three rules decide which:

- A factor is split only where an **input** dimension of it arrives split
  (and its mesh axis is free and divides its size). A factor that appears
  only in outputs is never split: the rows ``m`` of a CSR product have no
  input dimension (the row pointers have ``m + 1`` entries, a factor of their
  own), so the result is computed whole on every device.
- A factor of inputs only is kept whole unless it is declared a
  ``reduction_factor`` (split, partial results summed with ``psum``). The
  non-zeros ``nnz``, the row pointers ``ptr`` and the columns ``n`` are of
  that kind, and none is a reduction: the row pointers hold positions in the
  *whole* ``data`` and ``indices`` arrays, and the kernel reads ``v`` at any
  column, so each device needs all of them. They are gathered.
- A factor on both sides, declared nowhere, is split as its input arrives:
  the columns ``c`` of ``Y = A @ B`` (``"nnz, nnz, ptr, n c -> m c"``), and
  the batch axis ``jax.vmap`` adds to every rule (a batch of vectors is split
  by vector).

So a rule for a structural operation pays off for its independent dense
axes; splitting the structure itself (rows of ``A``) needs a data layout
that says which rows each device holds: one CSR block per device, run inside
``jax.shard_map`` (step 5), where the kernel sees its block and the rule
changes nothing. Step 6 checks the rules with ``check_kernel`` (Tutorial 8).
"""

from __future__ import annotations

import re

import jax

# Four CPU devices for this program, before anything uses jax (numba kernels
# run on the CPU; on a machine with several GPUs a mesh of those works alike
# for GPU kernels).
jax.config.update("jax_num_cpu_devices", 4)

import numba  # noqa: E402
import numpy as np  # noqa: E402
import xla_custom_kernel as xck  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402
from xla_custom_kernel.testing import check_kernel  # noqa: E402

# --- 1. The operations: y = A @ v and Y = A @ B, each with its rule ----------


@numba.njit
def csr_matvec_numba(data, indices, indptr, v, out):
    for r in range(indptr.size - 1):
        acc = out.dtype.type(0)
        for k in range(indptr[r], indptr[r + 1]):
            acc += data[k] * v[indices[k]]
        out[r] = acc


@numba.njit
def csr_matmat_numba(data, indices, indptr, b, out):
    for r in range(indptr.size - 1):
        for j in range(b.shape[1]):
            out[r, j] = 0
        for k in range(indptr[r], indptr[r + 1]):
            for j in range(b.shape[1]):
                out[r, j] += data[k] * b[indices[k], j]


csr_matvec = xck.XLACustomKernel("tutorial_sharding_csr_matvec")
csr_matvec.def_numba_kernel(lambda outs: csr_matvec_numba)
csr_matvec.def_sharding_rule("nnz, nnz, ptr, n -> m")

csr_matmat = xck.XLACustomKernel("tutorial_sharding_csr_matmat")
csr_matmat.def_numba_kernel(lambda outs: csr_matmat_numba)
csr_matmat.def_sharding_rule("nnz, nnz, ptr, n c -> m c")


@csr_matvec.def_call
def matvec(data, indices, indptr, v):
    m = indptr.shape[0] - 1
    return csr_matvec(data, indices, indptr, v, outs=jax.ShapeDtypeStruct((m,), v.dtype))


@csr_matmat.def_call
def matmat(data, indices, indptr, b):
    m = indptr.shape[0] - 1
    return csr_matmat(data, indices, indptr, b, outs=jax.ShapeDtypeStruct((m, b.shape[1]), b.dtype))


# A 16 x 16 matrix with 1 to 7 non-zeros per row, 64 in all (a multiple of
# the four devices, so that `data` can arrive split).
M = N = 16
rng = np.random.default_rng(0)
counts = np.array([4, 1, 7, 3, 5, 2, 6, 4, 3, 5, 4, 4, 2, 6, 5, 3])
INDPTR = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
INDICES = np.concatenate([np.sort(rng.choice(N, c, replace=False)) for c in counts])
INDICES = INDICES.astype(np.int32)
DATA = rng.standard_normal(INDICES.size).astype(np.float32)
DENSE = np.zeros((M, N), np.float32)
DENSE[np.repeat(np.arange(M), counts), INDICES] = DATA
assert DATA.size == 64
# A vector, a matrix of 8 columns, a batch of 8 vectors.
v = rng.standard_normal(N).astype(np.float32)
b = rng.standard_normal((N, 8)).astype(np.float32)
vs = rng.standard_normal((8, N)).astype(np.float32)

mesh = Mesh(np.array(jax.devices("cpu")), ("d",))


def put(x, spec):
    return jax.device_put(x, NamedSharding(mesh, spec))


def dense_product(data, indices, indptr, x):  # the reference check_kernel compares with
    return DENSE @ x


def kernel_calls(f, *args):
    """What each device runs, from the compiled program: for each call of a
    numba kernel, its operands' and result's shapes (a shard's shapes where
    the call runs on shards), and whether any operand is gathered."""
    text = jax.jit(f).lower(*args).compile().as_text()
    calls = []
    for line in text.splitlines():
        if 'custom_call_target="numba_cpu.' not in line:
            continue
        result = re.search(r"= (\w+\[[\d,]*\])", line).group(1)
        layouts = line.split("operand_layout_constraints={")[1]
        operands = re.findall(r"(\w+\[[\d,]*\])\{", layouts.split("}}")[0] + "}")
        calls.append(f"({', '.join(operands)}) -> {result}")
    return calls, "all-gather" in text


def show(title, f, *args, want):
    calls, gathered = kernel_calls(f, *args)
    out = jax.jit(f)(*args)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    print(f"{title}:")
    print(f"  each device's kernel call: {'; '.join(calls)}")
    print(f"  operands gathered: {gathered}; result sharding: {out.sharding.spec}")
    return calls, gathered, out.sharding.spec


# --- 2. A @ v with everything split: the structure and v are gathered --
# `data`, `indices` and `v` arrive split over the four devices. No factor
# of the rule may stay split (nnz, ptr and n are inputs-only and not
# reductions; m is in no input), so every device gathers them and runs
# the whole product: the result is replicated (P()).
calls, gathered, spec = show(
    "A @ v, data/indices/v split",
    matvec,
    put(DATA, P("d")),
    put(INDICES, P("d")),
    INDPTR,
    put(v, P("d")),
    want=DENSE @ v,
)
assert calls == ["(f32[64], s32[64], s32[17], f32[16]) -> f32[16]"]
assert gathered and spec == P()


# --- 3. A @ B: the columns of B are split, and so is the result --------
# c is on both sides: each device multiplies the whole A by its 2 of
# B's 8 columns, nothing is gathered, and Y keeps B's split.
calls, gathered, spec = show(
    "A @ B, B split by columns",
    matmat,
    DATA,
    INDICES,
    INDPTR,
    put(b, P(None, "d")),
    want=DENSE @ b,
)
assert calls == ["(f32[64], s32[64], s32[17], f32[16,2]) -> f32[16,2]"]
assert not gathered and spec == P(None, "d")

# A split along the rows of B (n, inputs only) is gathered instead.
_, gathered, spec = show(
    "A @ B, B split by rows", matmat, DATA, INDICES, INDPTR, put(b, P("d")), want=DENSE @ b
)
assert gathered and spec == P()


# --- 4. jax.vmap over vectors: the batch is a factor of its own, split -
# vmap adds the batch axis to the rule as an independent factor; a batch
# of 8 vectors split over 4 devices runs as 4 calls of 2 vectors each.
batched = jax.vmap(matvec, in_axes=(None, None, None, 0))
calls, gathered, spec = show(
    "vmap of A @ v, the batch split",
    batched,
    DATA,
    INDICES,
    INDPTR,
    put(vs, P("d")),
    want=vs @ DENSE.T,
)
assert calls == ["(f32[64], s32[64], s32[17], f32[2,16]) -> f32[2,16]"]
assert not gathered and spec == P("d")


# --- 5. Rows of A split: one CSR block per device, in jax.shard_map -----
# Each device holds the rows it computes, as a CSR matrix of its own (row
# pointers counted from its own first non-zero), padded to the largest
# block's number of non-zeros so that the blocks stack into one array
# (the padding lies past every row's end, so the kernel never reads it).
parts = mesh.size
rows = M // parts
starts = INDPTR[::rows]
width = int(np.diff(starts).max())
block_data = np.zeros((parts, width), np.float32)
block_indices = np.zeros((parts, width), np.int32)
block_indptr = np.zeros((parts, rows + 1), np.int32)
for p in range(parts):
    lo, hi = starts[p], starts[p + 1]
    block_data[p, : hi - lo] = DATA[lo:hi]
    block_indices[p, : hi - lo] = INDICES[lo:hi]
    block_indptr[p] = INDPTR[p * rows : (p + 1) * rows + 1] - lo


def blocked_matvec(data, indices, indptr, v):
    # Inside shard_map each device sees its own block (leading axis 1).
    return matvec(data[0], indices[0], indptr[0], v)


f = jax.shard_map(
    blocked_matvec,
    mesh=mesh,
    in_specs=(P("d"), P("d"), P("d"), P()),
    out_specs=P("d"),
)
calls, gathered, spec = show(
    "rows split: one CSR block per device (shard_map)",
    f,
    put(block_data, P("d")),
    put(block_indices, P("d")),
    put(block_indptr, P("d")),
    v,
    want=DENSE @ v,
)
assert calls == [f"(f32[{width}], s32[{width}], s32[{rows + 1}], f32[16]) -> f32[{rows}]"]
assert not gathered and spec == P("d")


# --- 6. check_kernel runs each op under a sharded jit and shard_map too --
# Its sharding rows compare the sharded calls with the unsharded op: a
# factor an output carries split (c; A @ v has none, which the report
# says), and each factor the rule keeps whole split in the inputs, which
# the rule must gather back.
report = check_kernel(
    csr_matmat,
    DATA,
    INDICES,
    INDPTR,
    b,
    checks=("results", "sharding"),
    reference=dense_product,
)
print(report)
assert {"sharding: sharded jit", "sharding: shard_map"} <= {r.check for r in report.passed}
report = check_kernel(
    csr_matvec,
    DATA,
    INDICES,
    INDPTR,
    v,
    checks=("results", "sharding"),
    reference=dense_product,
)
print(report)
assert [r.check for r in report.skipped] == ["sharding: sharded jit", "sharding: shard_map"]
assert "sharding: whole factors split in the inputs" in {r.check for r in report.passed}

print("all steps passed")
