"""Autotuning: which backend of an ``XLACustomKernel`` is fastest, per call signature.

A kernel call with ``backend="auto"`` (or a platform whose default is
``"auto"``, or ``xla_custom_kernel.set_backend("auto")``) asks this module,
when XLA lowers the call, which registered backend to use. The answer is keyed
by the operation, the platform, the input and output shapes and dtypes, the
static keywords, the batch levels of ``vmap`` and the set of registered
backends. It comes, in order, from:

1. this process's memory;
2. process 0, in a program of several JAX processes (``jax.distributed``):
   process 0 decides and shares the decision through JAX's key-value store,
   so that every process lowers the same program with the same backends;
3. the cache on disk (:func:`cache_dir`), one file per machine and software
   (CPU model or GPU name, Python, and the versions of jax, jaxlib, numpy,
   numba, warp-lang and this project's packages): a new version is a new file;
   what is read back is checked before it is used (``_autotune_record`` and
   ``_autotune_cache``): a bad file or entry is a miss with an
   :class:`AutotuneWarning` naming it (a bad message from process 0 gives
   the fixed default, with a warning naming its key);
4. a measurement: every backend runs once on data of the call's shapes (from
   the kernel's ``def_autotune_data``, else random floats and zero integers);
   their results are compared with the reference backend's (the platform's
   fixed default) within per-dtype tolerances (:data:`TOLERANCES`); the ones
   that fail or disagree are never chosen (an :class:`AutotuneWarning` names
   them); the rest are timed by kernel-bench's engine, each run a chain of
   calls in one compiled program (as the suite's ``--n-batch``), the
   candidates interleaved round by round, within a time budget
   (:func:`set_budget`); the one with the lowest time per call (the least
   over its rounds: the run least disturbed by the rest of the machine)
   wins, ties going to the earlier registered.

The decision is deterministic given the cache: a decision read from memory, the
disk or process 0 is used as it is. ``XLACustomKernel.explain`` and
``kernel-bench autotune`` show decisions; :func:`clear` forgets them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import re
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import jax
import numpy as np
from ffi_core.checking import TOLERANCES as _TOLERANCES
from jax import core as jax_core

from . import _autotune_cache
from ._autotune_cache import CACHE_ENV as CACHE_ENV
from ._autotune_cache import cache_dir as cache_dir
from ._autotune_cache import cached_decisions as cached_decisions
from ._autotune_cache import fingerprint as fingerprint
from ._autotune_record import PLATFORMS as _PLATFORMS
from ._autotune_record import AutotuneWarning as AutotuneWarning
from ._autotune_record import Candidate as Candidate
from ._autotune_record import Decision as Decision
from ._autotune_record import InvalidRecord as InvalidRecord
from ._autotune_record import parse_message
from ._kernel import default_platform, max_difference
from ._timing import calls_per_run, chained, interleaved

__all__ = [
    "CACHE_ENV",
    "DEFAULT_BUDGET_S",
    "TOLERANCES",
    "AutotuneWarning",
    "Candidate",
    "Decision",
    "InvalidRecord",
    "cache_dir",
    "cached_decisions",
    "clear",
    "decide",
    "explain",
    "fingerprint",
    "get_budget",
    "recording",
    "set_budget",
    "stats",
]

#: Seconds of timing a new decision may take by default (compiling each
#: backend's program once comes on top).
DEFAULT_BUDGET_S = 0.2
#: ``(rtol, atol)`` by dtype name within which a backend's results must agree
#: with the reference backend's; dtypes not named must agree exactly. The one
#: table of ``ffi_core.checking``, which ``check_kernel`` holds results to too.
TOLERANCES: dict[str, tuple[float, float]] = _TOLERANCES
_MAX_ROUNDS = 5
_MIN_ROUNDS = 3
# Two best candidates closer than this ratio get more rounds of their own.
_CLOSE = 1.10
_KV_TIMEOUT_MS = 600_000
# "<function f at 0x7f...>": a repr that differs in every process.
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


# ------------------------------------------------------------------ settings

_lock = threading.RLock()
_budget_s = DEFAULT_BUDGET_S
# Decisions made or read in this process, by the call signature as the lowering
# rule gives it (hashable avals and static values: no digest to compute).
_memory: dict[tuple[Any, ...], Decision] = {}
_stats = {"measured": 0, "memory": 0, "disk": 0, "process 0": 0, "fallback": 0}
_recorders: list[list[Decision]] = []


def set_budget(seconds: float) -> None:
    """Seconds of timing one new decision may take (default :data:`DEFAULT_BUDGET_S`).

    At least :data:`_MIN_ROUNDS` rounds run even where one call takes longer.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"`seconds` must be a positive number, got {seconds!r}")
    global _budget_s
    _budget_s = float(seconds)


def get_budget() -> float:
    """The time budget of a new decision, in seconds."""
    return _budget_s


def stats() -> dict[str, int]:
    """How many decisions this process measured, and how many it took from
    memory, the disk, process 0 or the fallback."""
    with _lock:
        return dict(_stats)


@contextlib.contextmanager
def recording() -> Iterator[list[Decision]]:
    """Collect the decisions made or looked up while the block runs (in this thread
    and others), in order."""
    found: list[Decision] = []
    with _lock:
        _recorders.append(found)
    try:
        yield found
    finally:
        with _lock:
            _recorders.remove(found)


# ------------------------------------------------------------------ forgetting


def clear(op: str | None = None) -> int:
    """Forget the decisions of operation ``op`` (all when None), on disk and in
    this process; returns how many were removed from the disk. Functions
    already compiled keep their backends: JAX's caches are cleared so that the
    next call of a jitted function decides again."""
    with _lock:
        removed = _autotune_cache.remove(op)
        for key in [k for k, d in _memory.items() if op is None or d.op == op]:
            del _memory[key]
    jax.clear_caches()
    return removed


# ------------------------------------------------------------------ signatures


def _describe_aval(a: Any) -> str:
    return f"{np.dtype(a.dtype).name}{list(a.shape)}"


@dataclasses.dataclass(frozen=True)
class _Signature:
    op: str
    platform: str
    inputs: tuple[Any, ...]  # avals, batch axes in front
    outs: tuple[Any, ...]  # avals without the batch axes
    multiple: bool
    static: tuple[tuple[str, Any], ...]
    batch: tuple[tuple[int, tuple[bool, ...]], ...]
    backends: tuple[str, ...]

    @functools.cached_property
    def key(self) -> str:
        data = {
            "op": self.op,
            "platform": self.platform,
            "inputs": [[list(a.shape), np.dtype(a.dtype).name] for a in self.inputs],
            "outs": [[list(a.shape), np.dtype(a.dtype).name] for a in self.outs],
            "multiple": self.multiple,
            "static": [[k, repr(v)] for k, v in self.static],
            "batch": [[size, list(mask)] for size, mask in self.batch],
            "backends": list(self.backends),
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:32]

    def unstable_static(self) -> str | None:
        """The first static keyword whose repr holds a memory address, or None."""
        return next((k for k, v in self.static if _ADDRESS.search(repr(v))), None)

    def words(self) -> str:
        parts = [", ".join(map(_describe_aval, self.inputs)) or "no inputs"]
        if self.static:
            parts.append(", ".join(f"{k}={v!r}" for k, v in self.static))
        for size, mask in self.batch:
            which = ", ".join(str(i) for i, m in enumerate(mask) if m)
            parts.append(f"vmap {size} over input {which}")
        return "; ".join(parts)

    def lead(self, i: int) -> tuple[int, ...]:
        """The batch axes in front of input ``i``."""
        return tuple(size for size, mask in self.batch if mask[i])


# ------------------------------------------------------------------ deciding


def decide(
    kernel: Any,
    platform: str,
    inputs: Sequence[Any],
    outs: Sequence[Any],
    multiple: bool,
    static: tuple[tuple[str, Any], ...],
    batch: tuple[tuple[int, tuple[bool, ...]], ...] = (),
) -> Decision:
    """The backend of ``kernel`` for one call signature on ``platform`` (see the
    module docs for where the answer comes from). ``inputs`` are the abstract
    values of the (batched) inputs, ``outs`` those of the unbatched outputs,
    ``static`` the sorted static keywords, ``batch`` the batch levels.
    ``XLACustomKernel`` calls this when it lowers a call whose backend is
    ``"auto"``."""
    backends = tuple(kernel.available_backends(platform))
    fast_key = (kernel.name, platform, *inputs, None, *outs, multiple, static, batch, backends)
    with _lock:
        decision = _memory.get(fast_key)
        if decision is not None:
            _stats["memory"] += 1
        else:
            sig = _Signature(
                kernel.name,
                platform,
                tuple(inputs),
                tuple(outs),
                multiple,
                tuple(static),
                tuple(batch),
                backends,
            )
            decision = _decide(kernel, sig)
            _memory[fast_key] = decision
        for found in _recorders:
            found.append(decision)
    return decision


def _decide(kernel: Any, sig: _Signature) -> Decision:
    if len(sig.backends) == 1:
        return Decision(
            sig.op, sig.platform, sig.words(), sig.key, sig.backends[0], source="only backend"
        )
    client = _distributed_client()
    if client is None:
        return _local(kernel, sig)
    unstable = sig.unstable_static()
    if unstable:
        raise RuntimeError(
            f"backend 'auto' of {sig.op} cannot be agreed between processes: static "
            f"keyword {unstable!r} is written with a memory address, different in every "
            "process, so the processes would not find each other's decision; pass a value "
            "whose repr is the same everywhere, or pick a backend by name"
        )
    kv_key = f"kernel_bench/autotune/{sig.key}"
    if jax.process_index() == 0:
        decision = _local(kernel, sig)
        client.key_value_set(kv_key, json.dumps(decision.to_dict()), allow_overwrite=True)
        return decision
    try:
        text = client.blocking_key_value_get(kv_key, _KV_TIMEOUT_MS)
    except Exception as exc:
        raise RuntimeError(
            f"process {jax.process_index()} waited {_KV_TIMEOUT_MS // 1000} s for process 0's "
            f"autotune decision on {sig.op} ({sig.words()}): {exc}. Every process must lower "
            "the same program; pick a backend by name where they do not"
        ) from exc
    try:
        decision = parse_message(
            text,
            key=sig.key,
            op=sig.op,
            platform=sig.platform,
            backends=sig.backends,
            source="process 0",
        )
    except InvalidRecord as exc:
        warnings.warn(
            f"process {jax.process_index()} ignores the autotune decision on {sig.op} "
            f"({sig.words()}) under the key {kv_key!r} of JAX's key-value store: {exc}. "
            f"It uses the fixed default {kernel.fixed_default(sig.platform)!r}",
            AutotuneWarning,
            stacklevel=4,
        )
        return _fallback(kernel, sig, f"process 0's decision under {kv_key!r} is not valid")
    _stats["process 0"] += 1
    return decision


def _distributed_client() -> Any:
    # JAX keeps the client of jax.distributed.initialize in a private module;
    # it is read, never changed. None in a single-process program.
    if jax.process_count() < 2:
        return None
    try:
        from jax._src import distributed
    except ImportError:
        return None
    return getattr(distributed.global_state, "client", None)


def _fallback(kernel: Any, sig: _Signature, reason: str) -> Decision:
    _stats["fallback"] += 1
    backend = kernel.fixed_default(sig.platform)
    return Decision(
        sig.op, sig.platform, sig.words(), sig.key, backend, source="fallback", reason=reason
    )


def _local(kernel: Any, sig: _Signature) -> Decision:
    try:
        device = jax.devices(sig.platform)[0]
    except RuntimeError:
        return _fallback(kernel, sig, f"no {sig.platform} device in this process to measure on")
    found = _autotune_cache.from_disk(sig.platform, sig.key, sig.op, sig.backends)
    if found is not None:
        _stats["disk"] += 1
        return found
    decision = _measure(kernel, sig, device)
    # A static value written with a memory address makes a key no later
    # process computes again: such decisions stay in this process.
    if decision.source == "measured" and sig.unstable_static() is None:
        _autotune_cache.to_disk(sig.platform, decision)
    return decision


def _default_data(struct: jax.ShapeDtypeStruct, rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(struct.dtype)
    if dtype.kind == "f" or dtype.name == "bfloat16":
        return rng.standard_normal(struct.shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(struct.shape) + 1j * rng.standard_normal(struct.shape)).astype(
            dtype
        )
    return np.zeros(struct.shape, dtype)


def _data(kernel: Any, sig: _Signature) -> list[np.ndarray]:
    unbatched = [
        jax.ShapeDtypeStruct(tuple(a.shape[len(sig.lead(i)) :]), a.dtype)
        for i, a in enumerate(sig.inputs)
    ]
    outs = tuple(jax.ShapeDtypeStruct(o.shape, o.dtype) for o in sig.outs)
    made = kernel.autotune_data(unbatched, outs if sig.multiple else outs[0], dict(sig.static))
    if made is None:
        rng = np.random.default_rng(int(sig.key[:8], 16))
        made = [_default_data(s, rng) for s in unbatched]
    made = [np.asarray(x) for x in made]
    problem = None
    if len(made) != len(unbatched):
        problem = f"{len(made)} arrays for {len(unbatched)} inputs"
    else:
        for i, (x, s) in enumerate(zip(made, unbatched, strict=True)):
            if x.shape != s.shape or x.dtype != np.dtype(s.dtype):
                problem = f"{x.dtype.name}{list(x.shape)} for input {i}, {_describe_aval(s)}"
                break
    if problem is not None:
        raise ValueError(
            f"the autotune data function of kernel {sig.op!r} made {problem} was expected; "
            "it must return one array per input with the shapes and dtypes it is given"
        )
    return [np.broadcast_to(x, sig.lead(i) + x.shape) for i, x in enumerate(made)]


def _disagreement(ref: Sequence[Any], out: Sequence[Any]) -> str | None:
    for i, (a, b) in enumerate(zip(ref, out, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        rtol, atol = TOLERANCES.get(a.dtype.name, (0.0, 0.0))
        if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
            worst = max_difference(a, b)
            return f"output {i} differs by up to {worst:.3g} (rtol={rtol}, atol={atol})"
    return None


def _describe_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.split("\n-----", 1)[0].splitlines()[0] if text else type(exc).__name__


def _measure(kernel: Any, sig: _Signature, device: Any) -> Decision:
    data = jax.device_put(_data(kernel, sig), device)
    runs: dict[str, Any] = {}
    outputs: dict[str, list[Any]] = {}
    left_out: dict[str, Candidate] = {}
    one = jax.numpy.asarray(1, dtype=jax.numpy.int32)
    for backend in sig.backends:
        bound = functools.partial(
            kernel.primitive.bind,
            outs=sig.outs,
            multiple=sig.multiple,
            static=sig.static,
            backend=backend,
            batch=sig.batch,
        )
        run = chained(lambda *args, bound=bound: list(bound(*args)))
        try:
            outputs[backend] = jax.device_get(jax.block_until_ready(run(one, *data)))
        except Exception as exc:
            left_out[backend] = Candidate(backend, "failed", detail=_describe_error(exc))
            continue
        runs[backend] = run
    if not runs:
        return _fallback(kernel, sig, "every backend failed on the measurement data")
    reference = kernel.fixed_default(sig.platform)
    if reference not in outputs:
        reference = next(iter(outputs))
    for backend in list(runs):
        problem = (
            None if backend == reference else _disagreement(outputs[reference], outputs[backend])
        )
        if problem is not None:
            left_out[backend] = Candidate(
                backend, "disagrees", detail=f"{problem} from {reference!r}"
            )
            del runs[backend]
    for c in left_out.values():
        warnings.warn(
            f"autotune of {sig.op} ({sig.words()}) on {sig.platform} leaves out backend "
            f"{c.backend!r}: {c.status}: {c.detail}",
            AutotuneWarning,
            stacklevel=4,
        )
    times, counts = _time(runs, data)
    candidates = []
    for backend in sig.backends:
        if backend in left_out:
            candidates.append(left_out[backend])
        else:
            t = tuple(times[backend])
            candidates.append(Candidate(backend, "ok", min(t), t))
    timed = [c for c in candidates if c.us_per_call is not None]
    best = min(timed, key=lambda c: c.us_per_call).backend
    _stats["measured"] += 1
    return Decision(sig.op, sig.platform, sig.words(), sig.key, best, tuple(candidates), counts)


def _time(
    runs: Mapping[str, Any], data: Sequence[Any]
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Microseconds per call of each run, round by round, every run in each
    round, the order rotating; the calls per run chosen so that every run
    takes about the same share of the budget. Two thirds of the budget go to
    every candidate; where the two best are within :data:`_CLOSE` of each
    other, the last third to more rounds of those two alone."""
    budget = get_budget()
    per_run = budget * 2 / 3 / (_MAX_ROUNDS * len(runs))
    counts = {b: calls_per_run(run, data, per_run) for b, run in runs.items()}
    times: dict[str, list[float]] = {b: [] for b in runs}

    def rounds(names: list[str], seconds: float) -> None:
        found = interleaved(
            {b: runs[b] for b in names},
            counts,
            data,
            rounds=_MAX_ROUNDS,
            seconds=seconds,
            min_rounds=_MIN_ROUNDS,
        )
        for b, t in found.items():
            times[b] += t

    rounds(list(runs), budget * 2 / 3)
    if len(runs) > 2:
        best, second = sorted(runs, key=lambda b: min(times[b]))[:2]
        if min(times[second]) < _CLOSE * min(times[best]):
            rounds([best, second], budget / 3)
    elif len(runs) == 2:
        rounds(list(runs), budget / 3)
    return times, counts


# ------------------------------------------------------------------ explaining


def explain(
    kernel: Any, *inputs: Any, outs: Any, platform: str | None = None, **static: Any
) -> Decision:
    """The decision ``"auto"`` makes for ``kernel(*inputs, outs=outs, **static)``
    on ``platform`` (default: JAX's default backend), measured if it is not
    known yet. ``inputs`` may be arrays or ``jax.ShapeDtypeStruct``s."""
    platform = default_platform() if platform is None else platform
    if platform not in _PLATFORMS:
        raise ValueError(f"`platform` must be None, 'cpu', 'gpu' or 'tpu', got {platform!r}")
    for i, x in enumerate(inputs):
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise TypeError(
                f"input {i} of explain must be an array or a jax.ShapeDtypeStruct, got {type(x)!r}"
            )
    multiple = isinstance(outs, list | tuple)
    out_list = list(outs) if multiple else [outs]
    avals = [jax_core.ShapedArray(tuple(x.shape), np.dtype(x.dtype)) for x in inputs]
    out_avals = tuple(jax_core.ShapedArray(tuple(o.shape), np.dtype(o.dtype)) for o in out_list)
    if not kernel.available_backends(platform):
        raise ValueError(f"kernel {kernel.name!r} has no backend for platform {platform!r}")
    return decide(kernel, platform, avals, out_avals, multiple, tuple(sorted(static.items())))
