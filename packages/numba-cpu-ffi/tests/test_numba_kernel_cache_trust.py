"""What the handler cache trusts: only a directory of the current user that no
one else may write (anything else is refused and nothing is read from it), and
only files whose checksum matches (a corrupt one is deleted with a warning
naming it, the handler compiled again, and the next process finds a healthy
cache). Each process run here starts with an empty in-memory cache."""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import ffi_core
import pytest
from ffi_core.abi.native._disk_cache import _MAGIC
from numba_cpu_ffi import HandlerCacheWarning, cache_dir

_SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numba, numpy as np
    from numba_cpu_ffi import numba_kernel

    @numba.njit
    def trusted_serial(x, out):
        for i in range(x.shape[0]):
            out[i] = x[i] + 1

    @numba.njit(parallel=True)
    def trusted_parallel(x, out):
        for i in numba.prange(x.shape[0]):
            out[i] = x[i] * 2

    x = jnp.arange(8.0, dtype=jnp.float32)
    s = jax.ShapeDtypeStruct(x.shape, x.dtype)
    np.testing.assert_array_equal(numba_kernel(trusted_serial, s)(x), x + 1)
    np.testing.assert_array_equal(jax.jit(numba_kernel(trusted_parallel, s))(x), x * 2)
    rows = jnp.stack([x, x + 1, x + 2])
    np.testing.assert_array_equal(jax.vmap(numba_kernel(trusted_serial, s))(rows), rows + 1)
    print("ok")
    """
)


#: What the script compiles: two kernels (the serial one, and the parallel
#: one's serial form: its calls are too small for threads) and the shared
#: handlers of their three call shapes (the vmap of three small rows runs
#: them one by one: no loop of threads is built).
_ENTRIES = 5


def _start(cache: Path, *, strict: bool = True, **env: str) -> subprocess.Popen[str]:
    # strict: every warning is an error; otherwise warnings are printed once each.
    flags = ["-W", "error"] if strict else ["-W", "always"]
    return subprocess.Popen(
        [sys.executable, *flags, "-c", _SCRIPT],
        env=dict(os.environ, NUMBA_CPU_FFI_CACHE_DIR=str(cache), **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, f"exit {process.returncode}: {err[-4000:]}"
    assert out.strip() == "ok"
    return err


def _run(cache: Path, *, strict: bool = True, **env: str) -> str:
    """Run the script in a fresh process; its stderr."""
    return _finish(_start(cache, strict=strict, **env))


@pytest.fixture(scope="module")
def filled(built_once) -> Path:
    """A cache two processes filled at once, with Numba's own cache directory
    set beside it (``numba``), once per test run: tests work on copies."""

    def fill(folder: Path) -> None:
        numba_dir = str(folder / "numba")
        for process in [_start(folder / "cache", NUMBA_CACHE_DIR=numba_dir) for _ in range(2)]:
            _finish(process)

    return built_once("cache-trust-filled", fill) / "cache"


def _copy(filled: Path, path: Path) -> Path:
    shutil.copytree(filled, path, copy_function=shutil.copy2)
    return path


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {
        path.relative_to(root).as_posix(): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in root.rglob("*")
    }


def _refusal(path: Path, reason: str) -> str:
    return (
        "numba-cpu-ffi's handler cache ($NUMBA_CPU_FFI_CACHE_DIR) is not kept on disk: the "
        f"directory {str(path)!r} is refused because {reason}. Use a directory that only "
        "you own and may write (mode 0700), or remove this one so it is created anew."
    )


# The directory rule.


def test_the_cache_directory_is_created_private(tmp_path, monkeypatch):
    path = tmp_path / "a" / "handlers"
    monkeypatch.setenv("NUMBA_CPU_FFI_CACHE_DIR", str(path))
    assert cache_dir() == path
    assert path.stat().st_mode & 0o777 == 0o700


def test_the_default_directory_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CPU_FFI_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "numba-cpu-ffi"
    assert (tmp_path / "numba-cpu-ffi").stat().st_mode & 0o777 == 0o700


def test_a_directory_others_may_write_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "shared"
    path.mkdir()
    path.chmod(0o777)
    monkeypatch.setenv("NUMBA_CPU_FFI_CACHE_DIR", str(path))
    reason = "group or others may write into it (mode 0777)"
    with pytest.warns(ffi_core.CacheDirWarning, match=re.escape(_refusal(path, reason))):
        assert cache_dir() is None


def test_a_symlink_is_refused(tmp_path, monkeypatch):
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.setenv("NUMBA_CPU_FFI_CACHE_DIR", str(tmp_path / "link"))
    reason = "it is a symbolic link"
    with pytest.warns(
        ffi_core.CacheDirWarning, match=re.escape(_refusal(tmp_path / "link", reason))
    ):
        assert cache_dir() is None


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_another_users_directory_is_never_read(tmp_path, filled):
    # A cache another user prepared, with an index whose checksum is right and
    # whose pickle would run code: refused, nothing read or written there.
    _copy(filled, tmp_path / "healthy")
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    marker = tmp_path / "pwned"
    evil = pickle.dumps(_Evil(f"touch {marker}"))
    for source in (tmp_path / "healthy").iterdir():
        content = source.read_bytes()
        if source.suffix == ".nbi":
            content = _MAGIC + hashlib.sha256(evil).digest() + evil
        (hostile / source.name).write_bytes(content)
    os.chown(hostile, 12345, 12345)
    hostile.chmod(0o777)
    before = _files(hostile)
    err = _run(hostile, strict=False)
    assert "is owned by uid 12345, not by the current user (uid 0)" in err
    assert "CacheDirWarning" in err
    assert not marker.exists()
    assert _files(hostile) == before


class _Evil:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def test_numba_cache_dir_does_not_move_the_handlers(filled):
    # Numba's own cache settings do not divert handlers out of the checked directory.
    numba_dir = filled.parent / "numba"
    assert not numba_dir.exists() or not any(numba_dir.rglob("*.nb*"))
    names = _files(filled)
    assert all("/" not in name for name in names), "no subdirectory is created"
    assert sum(name.endswith(".nbi") for name in names) == _ENTRIES


# Files: checksummed, corrupt ones healed.


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x80\x04garbage that is no pickle" * 3)


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _truncate(path: Path) -> None:
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2])


def _flip_64(path: Path) -> None:
    content = bytearray(path.read_bytes())
    step = max(1, (len(content) - 256) // 64)
    for k in range(64):
        content[128 + k * step] ^= 0xFF
    path.write_bytes(bytes(content))


def _valid_checksum_bad_content(path: Path) -> None:
    payload = pickle.dumps(("not", "a", "compiled", "function"))
    path.write_bytes(_MAGIC + hashlib.sha256(payload).digest() + payload)


@pytest.mark.parametrize(
    ("suffix", "corrupt", "reason"),
    [
        (".nbi", _garbage, "does not match its checksum (truncated or corrupt)"),
        (".nbi", _empty, "does not match its checksum (truncated or corrupt)"),
        (".nbc", _truncate, "does not match its checksum (truncated or corrupt)"),
        (".nbc", _flip_64, "does not match its checksum (truncated or corrupt)"),
        (".nbc", _valid_checksum_bad_content, "failed to load ("),
    ],
    ids=["garbage-nbi", "empty-nbi", "truncated-nbc", "flipped-nbc", "unloadable-nbc"],
)
def test_a_corrupt_cache_file_is_healed(tmp_path, filled, suffix, corrupt, reason):
    tmp_path = _copy(filled, tmp_path / "cache")
    corrupted = sorted(path for path in tmp_path.iterdir() if path.suffix == suffix)
    assert len(corrupted) == _ENTRIES
    for path in corrupted:
        corrupt(path)
    err = _run(tmp_path, strict=False)
    for path in corrupted:
        assert f"numba-cpu-ffi's handler cache file {str(path)!r} {reason}" in err, err
    assert err.count("HandlerCacheWarning") == len(corrupted), err
    if corrupt in (_garbage, _valid_checksum_bad_content):
        # For a healed index and a healed code file (one kind each: the healing
        # is the same for every kind of damage), the next process loads
        # everything, warns about nothing, writes nothing.
        healed = _files(tmp_path)
        _run(tmp_path)
        assert _files(tmp_path) == healed


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_what_is_no_file_at_an_entrys_name_is_a_miss(tmp_path, filled):
    # A directory at an index's name, a FIFO at a code file's: neither a crash
    # nor a wait for a writer that never comes, and neither said to be deleted.
    tmp_path = _copy(filled, tmp_path / "cache")
    index = sorted(path for path in tmp_path.iterdir() if path.suffix == ".nbi")[0]
    code = sorted(path for path in tmp_path.iterdir() if path.suffix == ".nbc")[-1]
    index.unlink()
    index.mkdir()
    code.unlink()
    os.mkfifo(code)
    err = _run(tmp_path, strict=False)
    for path in (index, code):
        message = (
            f"numba-cpu-ffi's handler cache file {str(path)!r} is not a regular file; it is "
            "ignored and the handler is compiled again"
        )
        assert message in err, err
    # The index is read again when the new code is saved: warned about twice.
    warned = set(
        re.findall(r"HandlerCacheWarning: numba-cpu-ffi's handler cache file '([^']+)'", err)
    )
    assert warned == {str(index), str(code)}, err
    assert index.is_dir()


def test_two_processes_fill_one_cache_at_once(tmp_path, filled):
    # The fixture's two processes filled it at once; a copy keeps sizes and times.
    files = _files(_copy(filled, tmp_path / "cache"))
    assert files == _files(filled)
    assert sum(name.endswith(".nbc") for name in files) == _ENTRIES
    _run(tmp_path / "cache")
    assert _files(tmp_path / "cache") == files


def test_the_warning_is_public():
    assert issubclass(HandlerCacheWarning, UserWarning)
