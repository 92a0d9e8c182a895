"""Quiet: a timed run starts once the process's other threads stopped running."""

from __future__ import annotations

import hashlib
import sys
import threading
import time

import pytest
from kernel_bench import _quiet, _timing

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _busy_thread(seconds: float) -> threading.Thread:
    """A thread that runs for about ``seconds`` without holding the GIL
    (hashing large buffers releases it), started and running on return."""
    block = b"\0" * (1 << 20)
    started = threading.Event()

    def work():
        started.set()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            hashlib.sha256(block).digest()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    started.wait()
    return thread


@linux_only
def test_a_quiet_process_waits_only_for_two_looks():
    with _quiet.Quiet() as quiet:
        assert quiet.enabled
        waited = quiet.wait()
    assert 0.0 < waited < _quiet.LIMIT_SECONDS


@linux_only
def test_waits_until_a_running_thread_ends():
    thread = _busy_thread(0.15)
    start = time.perf_counter()
    with _quiet.Quiet(limit=5.0) as quiet:
        waited = quiet.wait()
    assert not thread.is_alive()
    assert waited >= 0.1 and time.perf_counter() - start >= 0.1
    thread.join()


@linux_only
def test_gives_up_after_waits_that_reach_the_limit():
    thread = _busy_thread(0.5)
    with _quiet.Quiet(limit=0.02) as quiet:
        waits = [quiet.wait() for _ in range(_quiet.GIVE_UP_AFTER)]
        assert all(w >= 0.02 for w in waits)
        # It stopped waiting: a thread that never stops would cost every run its limit.
        assert not quiet.enabled and quiet.wait() == 0.0
        assert quiet._files == {}
    thread.join()


def test_does_not_wait_where_threads_cannot_be_read(monkeypatch, tmp_path):
    monkeypatch.setattr(_quiet, "_TASKS", str(tmp_path / "missing"))
    with _quiet.Quiet() as quiet:
        assert not quiet.enabled and quiet.wait() == 0.0


def test_does_not_wait_when_asked_not_to():
    with _quiet.Quiet(enabled=False) as quiet:
        assert quiet.wait() == 0.0


def _logged_runs(monkeypatch):
    # Python stand-ins for chained programs, and a Quiet that logs its waits
    # between the runs.
    log: list[str] = []

    class Logged(_quiet.Quiet):
        def wait(self):
            log.append("wait" if self.enabled else "no wait")
            return 0.0

    monkeypatch.setattr(_timing, "Quiet", Logged)

    def make(name):
        def run(count, *data):
            log.append(f"{name}({int(count)})")
            return 0.0

        return run

    return {"a": make("a")}, log


def test_interleaved_waits_before_each_timed_run_and_its_untimed_call(monkeypatch):
    runs, log = _logged_runs(monkeypatch)
    _timing.interleaved(runs, {"a": 7}, (), rounds=2)
    # The warm-up run, then per round: the wait, the untimed call, the timed run.
    assert log == ["a(7)", "wait", "a(1)", "a(7)", "wait", "a(1)", "a(7)"]


def test_interleaved_without_quiet_does_not_wait(monkeypatch):
    runs, log = _logged_runs(monkeypatch)
    _timing.interleaved(runs, {"a": 7}, (), rounds=1, quiet=False)
    assert log == ["a(7)", "no wait", "a(1)", "a(7)"]


def test_each_dispatch_follows_a_wait_and_an_untimed_call_of_its_own(monkeypatch):
    from kernel_bench import _program

    runs, log = _logged_runs(monkeypatch)
    monkeypatch.setattr(_program, "Quiet", _timing.Quiet)  # the logging one
    timings, errors = _program.dispatch_times(runs, (), n_batch=3, n_runs=2)
    assert errors == {} and len(timings["a"].times_ms) == 2
    assert log == ["wait", "a(1)", "a(3)", "wait", "a(1)", "a(3)"]
