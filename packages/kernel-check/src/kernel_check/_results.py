"""Checks of results: eager vs ``jit`` vs a reference, repeated calls, other
backends, and calls from several threads at once."""

from __future__ import annotations

import threading
from typing import Any

import jax

from ._case import Case, describe_error, row_inputs
from ._report import CheckResult, failed, passed, skipped

__all__ = ["check_backends", "check_results", "check_threads"]


def check_results(case: Case) -> list[CheckResult]:
    """Eager vs jit, a repeated call, and the reference."""
    jitted = jax.jit(case.fn)

    def jit() -> CheckResult:
        got = jax.block_until_ready(jitted(*case.args))
        return case.compare("results: eager vs jit", case.expected, got, ("eager", "jit"))

    def repeated() -> CheckResult:
        first = jax.block_until_ready(jitted(*case.args))
        # Another call on other inputs in between: a kernel that keeps state
        # from one call to the next (an accumulator, an output it does not
        # fully write) gives another result the second time.
        jax.block_until_ready(jitted(*row_inputs(case.args, 1)))
        again = jax.block_until_ready(jitted(*case.args))
        return case.compare("results: repeated call", first, again, ("first call", "a later call"))

    def reference() -> CheckResult:
        if case.reference is None:
            return skipped("results: reference", "no `reference` given")
        ref = jax.block_until_ready(case.reference(*case.args))
        return case.compare("results: reference", ref, case.expected, ("reference", "op"))

    return [
        *case.run("results: eager vs jit", jit),
        *case.run("results: repeated call", repeated),
        *case.run("results: reference", reference),
    ]


def check_backends(case: Case) -> list[CheckResult]:
    """Each variant (backend) against the operation, under jit."""
    if not case.variants:
        return case.run(
            "backends",
            lambda: skipped(
                "backends", "the op has one implementation (no other backend registered)"
            ),
        )
    rows = []
    reference: Any = case.reference  # called only where it is not None
    for name, fn in case.variants.items():
        check = f"backends: {name}"

        def against_default(fn=fn, name=name, check=check) -> CheckResult:
            got = jax.block_until_ready(jax.jit(fn)(*case.args))
            return case.compare(check, case.expected, got, ("default", name))

        def against_reference(fn=fn, name=name, check=check, reference=reference) -> CheckResult:
            got = jax.block_until_ready(jax.jit(fn)(*case.args))
            ref = reference(*case.args)
            return case.compare(f"{check} vs reference", ref, got, ("reference", name))

        rows += case.run(check, against_default)
        if reference is not None:
            rows += case.run(f"{check} vs reference", against_reference)
    return rows


def check_threads(case: Case) -> list[CheckResult]:
    """The jitted op called from several threads at once, each on its own
    inputs, against the same calls made one after the other."""
    n = case.options.threads
    if n < 2:
        return case.run("threads", lambda: skipped("threads", f"`threads` is {n}"))
    return case.run("threads: concurrent calls", lambda: _threads(case, n))


def _threads(case: Case, n: int) -> CheckResult:
    jitted = jax.jit(case.fn)
    inputs = [row_inputs(case.args, t) for t in range(n)]
    expected = [jax.block_until_ready(jitted(*x)) for x in inputs]
    got: list[Any] = [None] * n
    errors: list[BaseException | None] = [None] * n
    barrier = threading.Barrier(n)

    def run(t: int) -> None:
        try:
            barrier.wait()
            for _ in range(_ROUNDS):
                out = jax.block_until_ready(jitted(*inputs[t]))
                if got[t] is None or case.compare("", expected[t], out).detail:
                    got[t] = out
        except BaseException as exc:  # reported below, in the thread that called
            errors[t] = exc

    threads = [threading.Thread(target=run, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    check = "threads: concurrent calls"
    for t in range(n):
        error = errors[t]
        if error is not None:
            return failed(check, f"thread {t} raised {describe_error(error)}")
        row = case.compare(check, expected[t], got[t], ("alone", f"in thread {t}"))
        if row.detail:
            return failed(check, f"thread {t}: {row.detail}")
    return passed(check, f"{n} threads, {_ROUNDS} calls each, each on its own inputs")


# Calls per thread: a race that one call misses, a few may catch.
_ROUNDS = 4
