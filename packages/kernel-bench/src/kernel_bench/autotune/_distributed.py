"""One decision for every process of a multi-process program (``jax.distributed``).

Process 0 decides and publishes its decision in JAX's key-value store; the
other processes wait for it, so that every process lowers the same program
with the same backends. What another process publishes is checked as a record
read from disk is (``_decision.parse_message``); a bad one gives the
fixed default, with an :class:`AutotuneWarning` naming its key. JAX's
key-value client is reached through ffi-core's one seam on JAX internals
(``ffi_core.bridge.distributed_client``).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

import jax
from ffi_core.bridge import distributed_client

from ._decision import AutotuneWarning, Decision, InvalidDecision, parse_message

__all__ = ["KV_TIMEOUT_MS", "client", "kv_key", "shared"]

#: How long a process waits for process 0's decision, in milliseconds.
KV_TIMEOUT_MS = 600_000


def client() -> Any:
    """JAX's key-value client in a program of several processes, else None."""
    if jax.process_count() < 2:
        return None
    return distributed_client()


def kv_key(site: Any) -> str:
    """The key of ``site``'s decision in JAX's key-value store."""
    return f"kernel_bench/autotune/{site.key}"


def shared(
    store: Any,
    site: Any,
    decide_here: Callable[[], Decision],
    fallback: Callable[[str], Decision],
) -> tuple[Decision, bool]:
    """The decision every process uses for ``site``: process 0's
    ``decide_here()``, published under :func:`kv_key`; in the others, what
    process 0 published (``fallback(reason)`` where it is not valid). The flag
    says whether it came from process 0 (in a process other than 0)."""
    unstable = site.unstable_static()
    if unstable:
        raise RuntimeError(
            f"backend 'auto' of {site.op} cannot be agreed between processes: static "
            f"keyword {unstable!r} is written with a memory address, different in every "
            "process, so the processes would not find each other's decision; pass a value "
            "whose repr is the same everywhere, or pick a backend by name"
        )
    key = kv_key(site)
    if jax.process_index() == 0:
        decision = decide_here()
        store.key_value_set(key, json.dumps(decision.to_dict()), allow_overwrite=True)
        return decision, False
    try:
        text = store.blocking_key_value_get(key, KV_TIMEOUT_MS)
    except Exception as exc:
        raise RuntimeError(
            f"process {jax.process_index()} waited {KV_TIMEOUT_MS // 1000} s for process 0's "
            f"autotune decision on {site.op} ({site.describe()}): {exc}. Every process must "
            "lower the same program; pick a backend by name where they do not"
        ) from exc
    try:
        decision = parse_message(
            text,
            key=site.key,
            op=site.op,
            platform=site.platform,
            backends=site.backends,
            source="process 0",
        )
    except InvalidDecision as exc:
        warnings.warn(
            f"process {jax.process_index()} ignores the autotune decision on {site.op} "
            f"({site.describe()}) under the key {key!r} of JAX's key-value store: {exc}. "
            f"It uses the fixed default {site.reference!r}",
            AutotuneWarning,
            stacklevel=6,
        )
        return fallback(f"process 0's decision under {key!r} is not valid"), False
    return decision, True
