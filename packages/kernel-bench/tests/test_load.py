"""The load of other processes (kernel_bench._load): read from /proc/stat,
less this process's own CPU time; unknown where it cannot be read."""

import os
import pathlib
import subprocess
import sys

import pytest
from kernel_bench import _load

HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class FakeClock:
    def __init__(self):
        self.wall, self.mine = 100.0, 5.0

    def monotonic(self):
        return self.wall

    def process_time(self):
        return self.mine


def _stat(busy_s: float, cpus: int = 2) -> str:
    # user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice:
    # the busy time spread over user, system and steal; idle and iowait large.
    ticks = round(busy_s * HZ)
    user, system, steal = ticks // 2, ticks // 4, ticks - ticks // 2 - ticks // 4
    head = f"cpu  {user} 0 {system} 900000 5000 0 0 {steal} 0 0"
    return "\n".join([head, *(f"cpu{i} 1 0 1 1 0 0 0 0 0 0" for i in range(cpus)), "intr 1"])


@pytest.fixture
def fake(monkeypatch, tmp_path):
    stat = tmp_path / "stat"
    clock = FakeClock()
    monkeypatch.setattr(_load, "PROC_STAT", str(stat))
    monkeypatch.setattr(_load, "time", clock)
    return stat, clock


def test_others_are_the_machines_busy_time_less_this_processs(fake):
    stat, clock = fake
    stat.write_text(_stat(1000.0))
    meter = _load.OtherLoad()
    # In 2 s of wall time the machine was busy 2.5 CPU seconds; this process
    # used 1.5 of them: others 1.0 s of the 4 CPU seconds there were.
    stat.write_text(_stat(1002.5))
    clock.wall += 2.0
    clock.mine += 1.5
    assert meter.seconds() == pytest.approx(1.0)
    assert meter.share() == pytest.approx(0.25)


def test_a_quiet_machine_has_no_load_even_where_ticks_round_below_this_process(fake):
    stat, clock = fake
    stat.write_text(_stat(1000.0))
    meter = _load.OtherLoad()
    stat.write_text(_stat(1001.0))  # counted in ticks: a little under this process's time
    clock.wall += 1.0
    clock.mine += 1.004
    assert (meter.seconds(), meter.share()) == (0.0, 0.0)


@pytest.mark.parametrize(
    "text",
    [
        "",  # empty
        "intr 1 2 3\ncpu0 1 2 3",  # no total line first
        "cpu  1 2 3",  # too few fields
        "cpu  a b c d e f g h i j\ncpu0 1",  # not numbers
        "cpu  -5 0 0 0 0 0 0 0 0 0\ncpu0 1",  # negative
        "cpu  1 0 1 1 0 0 0 0 0 0\nintr 1",  # no CPU counted
        b"cpu  \xff\xfe",  # not text
    ],
)
def test_what_is_not_linuxs_proc_stat_is_unknown_not_an_error(fake, text):
    stat, _ = fake
    if isinstance(text, bytes):
        stat.write_bytes(text)
    else:
        stat.write_text(text)
    meter = _load.OtherLoad()
    assert (meter.seconds(), meter.share()) == (None, None)


def test_no_proc_stat_is_unknown(fake):
    stat, _ = fake
    assert not stat.exists()
    assert _load.OtherLoad().share() is None


def test_a_file_that_turns_unreadable_midway_is_unknown(fake):
    stat, clock = fake
    stat.write_text(_stat(10.0))
    meter = _load.OtherLoad()
    stat.unlink()
    clock.wall += 1.0
    assert (meter.seconds(), meter.share()) == (None, None)


@pytest.mark.skipif(not pathlib.Path("/proc/stat").is_file(), reason="no /proc/stat (not Linux)")
def test_a_process_spinning_beside_is_counted_and_this_ones_own_work_is_not():
    # A child spins for about 0.6 s of CPU time while this process also
    # works: the meter counts the child (and whatever else runs beside the
    # test, so at least the child) and not this process's own work.
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n"
    meter = _load.OtherLoad()
    child = subprocess.Popen([sys.executable, "-c", spin])
    mine = _load.time.process_time()
    while _load.time.process_time() - mine < 0.3:
        pass
    assert child.wait(timeout=60) == 0
    others = meter.seconds()
    share = meter.share()
    assert others is not None and share is not None
    assert others >= 0.4  # the child's 0.6 s, less a few ticks of rounding
    assert 0.0 < share <= 1.0


def test_usable_cpus_are_the_process_affinity(monkeypatch):
    monkeypatch.setattr(_load.os, "sched_getaffinity", lambda pid: {3, 1}, raising=False)
    assert _load.usable_cpus() == (1, 3)
    monkeypatch.delattr(_load.os, "sched_getaffinity")  # as off Linux
    assert _load.usable_cpus() is None
