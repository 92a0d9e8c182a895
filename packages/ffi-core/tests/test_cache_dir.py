"""The one cache-directory rule: 0700, ours, no symlink, nobody else may write."""

from __future__ import annotations

import os
import pathlib
import re
import stat

import pytest
from ffi_core import CacheDirWarning, cache_root, checked_cache_dir


def test_created_with_mode_0700(tmp_path):
    target = tmp_path / "a" / "b"
    assert checked_cache_dir(target, purpose="the test cache") == target
    assert stat.S_IMODE(os.lstat(target).st_mode) == 0o700


def test_existing_private_directory_is_used(tmp_path):
    target = tmp_path / "mine"
    target.mkdir(mode=0o700)
    assert checked_cache_dir(target, purpose="the test cache") == target


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_writable_by_others_is_refused(tmp_path, mode):
    target = tmp_path / "shared"
    target.mkdir()
    os.chmod(target, mode)
    message = (
        f"the test cache is not kept on disk: the directory {str(target)!r} is refused because "
        f"group or others may write into it (mode {mode:04o}). Use a directory that only you "
        "own and may write (mode 0700), or remove this one so it is created anew."
    )
    with pytest.warns(CacheDirWarning, match=re.escape(message)):
        assert checked_cache_dir(target, purpose="the test cache") is None


def test_symlink_is_refused_even_to_a_safe_directory(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.warns(CacheDirWarning, match="it is a symbolic link"):
        assert checked_cache_dir(link, purpose="the test cache") is None


def test_a_file_is_refused(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.warns(CacheDirWarning, match="cannot be created"):
        assert checked_cache_dir(target, purpose="the test cache") is None


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to chown")
def test_owned_by_another_user_is_refused(tmp_path):
    target = tmp_path / "theirs"
    target.mkdir(mode=0o700)
    os.chown(target, 12345, 12345)
    with pytest.warns(
        CacheDirWarning, match=re.escape("it is owned by uid 12345, not by the current user")
    ):
        assert checked_cache_dir(target, purpose="the test cache") is None


def test_no_warning_when_asked(tmp_path, recwarn):
    target = tmp_path / "shared"
    target.mkdir()
    os.chmod(target, 0o777)
    assert checked_cache_dir(target, purpose="the test cache", warn=False) is None
    assert not recwarn.list


def test_cache_root_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_root() == tmp_path
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # the XDG spec says: ignore it
    assert cache_root() == pathlib.Path(os.path.expanduser("~")) / ".cache"


def test_env_cache_dir_follows_its_variable(tmp_path, monkeypatch):
    from ffi_core.bridge import env_cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TEST_CACHE_DIR", raising=False)
    default = env_cache_dir("TEST_CACHE_DIR", "test-cache", purpose="the test cache")
    assert default == tmp_path / "xdg" / "test-cache"
    assert stat.S_IMODE(os.lstat(default).st_mode) == 0o700
    monkeypatch.setenv("TEST_CACHE_DIR", str(tmp_path / "named"))
    assert env_cache_dir("TEST_CACHE_DIR", "test-cache", purpose="the test cache") == (
        tmp_path / "named"
    )
    monkeypatch.setenv("TEST_CACHE_DIR", "")
    assert env_cache_dir("TEST_CACHE_DIR", "test-cache", purpose="the test cache") is None
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("TEST_CACHE_DIR", str(shared))
    message = (
        f"the test cache ($TEST_CACHE_DIR) is not kept on disk: the directory {str(shared)!r} "
        "is refused because group or others may write into it (mode 0777). Use a directory "
        "that only you own and may write (mode 0700), or remove this one so it is created anew."
    )
    with pytest.warns(CacheDirWarning, match=re.escape(message)):
        assert env_cache_dir("TEST_CACHE_DIR", "test-cache", purpose="the test cache") is None


def test_an_unknown_home_is_refused_not_made_below_the_current_directory(tmp_path, monkeypatch):
    # $HOME unset and no home in the password database: ~ stays unexpanded.
    from ffi_core.bridge import env_cache_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("TEST_CACHE_DIR", raising=False)
    monkeypatch.setattr(os.path, "expanduser", lambda path: path)
    assert cache_root() == pathlib.Path("~/.cache")
    message = (
        "the test cache ($TEST_CACHE_DIR) is not kept on disk: the directory "
        "'~/.cache/test-cache' is refused because it is a relative path, which would move with "
        "the current directory (the home directory is unknown). Set $HOME or $XDG_CACHE_HOME, "
        "or name an absolute directory."
    )
    with pytest.warns(CacheDirWarning, match=f"^{re.escape(message)}$"):
        assert env_cache_dir("TEST_CACHE_DIR", "test-cache", purpose="the test cache") is None
    assert list(tmp_path.iterdir()) == []


def test_a_relative_setting_is_the_directory_below_the_current_one(tmp_path, monkeypatch):
    from ffi_core.bridge import env_cache_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TEST_CACHE_DIR", "here")
    found = env_cache_dir("TEST_CACHE_DIR", "test-cache", purpose="the test cache")
    assert found == tmp_path / "here"
    assert found is not None and found.is_absolute()
