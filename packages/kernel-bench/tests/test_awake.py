"""keep_cpus_awake: a CPU latency request of 0 held only within its block,
and a plain account of why not where the request file cannot be written."""

from __future__ import annotations

import os

import pytest
from kernel_bench._awake import LATENCY_FILE, Awake, held, keep_cpus_awake


def _open_on(path) -> int:
    # How many of this process's descriptors are open on ``path``.
    fds = "/proc/self/fd"
    found = 0
    for name in os.listdir(fds):
        try:
            found += os.readlink(os.path.join(fds, name)) == str(path)
        except OSError:
            continue
    return found


@pytest.fixture
def request_file(tmp_path):
    path = tmp_path / "cpu_dma_latency"
    path.write_bytes(b"\xff" * 4)
    return path


def test_the_default_file_is_linux_s_cpu_latency_request():
    assert LATENCY_FILE == "/dev/cpu_dma_latency"


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd (Linux)")
def test_the_request_is_held_within_the_block_only(request_file):
    assert _open_on(request_file) == 0
    assert not held()
    with keep_cpus_awake(path=str(request_file)) as awake:
        assert _open_on(request_file) == 1
        assert request_file.read_bytes() == b"\x00" * 4  # an s32 of 0 microseconds
        assert held()
        with keep_cpus_awake(False):  # a block that makes no request changes nothing
            assert held()
        assert held()
    assert not held()
    assert awake == Awake(True, f"a wake-up latency request of 0 us held through {request_file}")
    assert awake.describe() == (
        f"idle CPUs kept awake (a wake-up latency request of 0 us held through {request_file})"
    )
    assert _open_on(request_file) == 0


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd (Linux)")
def test_an_error_in_the_block_still_ends_the_request(request_file):
    with pytest.raises(RuntimeError, match="inside"), keep_cpus_awake(path=str(request_file)):
        raise RuntimeError("inside")
    assert _open_on(request_file) == 0
    assert not held()


def test_disabled_changes_nothing(request_file):
    with keep_cpus_awake(False, path=str(request_file)) as awake:
        assert request_file.read_bytes() == b"\xff" * 4
        assert not held()
    assert awake == Awake(False, "--no-keep-cpus-awake")
    assert awake.describe() == "idle CPUs not kept awake (--no-keep-cpus-awake)"


def test_a_file_that_cannot_be_opened_is_said_and_nothing_raised(tmp_path):
    missing = tmp_path / "absent"
    with keep_cpus_awake(path=str(missing)) as awake:
        assert not held()
    assert awake == Awake(
        False,
        f"{missing}: No such file or directory; it takes write access to {missing}",
    )
    assert not missing.exists()
    with keep_cpus_awake(path=str(tmp_path)) as awake:  # a directory
        pass
    assert awake == Awake(False, f"{tmp_path}: Is a directory; it takes write access to {tmp_path}")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_refused_write_is_said_and_the_file_closed():
    with keep_cpus_awake(path="/dev/full") as awake:
        pass
    assert awake == Awake(False, "/dev/full: the request was refused: No space left on device")
    if os.path.isdir("/proc/self/fd"):
        assert _open_on("/dev/full") == 0
