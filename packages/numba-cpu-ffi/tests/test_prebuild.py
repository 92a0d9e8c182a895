"""Prebuilt kernels: a library builds its kernels into a directory it ships;
a process that reads it compiles nothing (compiles counted), never writes
into it, and survives a bad file in it."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import ffi_core
import pytest
from ffi_core.abi.native import portable_cpus
from numba_cpu_ffi import prebuilt_dirs
from numba_cpu_ffi.prebuild import PrebuildError, build, main

# A small operator library: kernels made in a factory (a closure over a
# constant, one per static parameter), a prebuild function returning units.
_LIBRARY = textwrap.dedent(
    """
    import functools
    import jax, jax.numpy as jnp, numba
    from numba_cpu_ffi import numba_kernel

    @functools.cache
    def _kernel(c):
        @numba.njit
        def scale_add(x, y, out):
            for i in range(x.size):
                out[i] = c * x[i] + y[i]
        return scale_add

    def scale_add(x, y, c):
        return numba_kernel(_kernel(c), jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)

    SCALES = (0.5, 1.5, 2.5)

    def kernels():
        x = jax.ShapeDtypeStruct((16,), jnp.float32)
        f = jax.jit(scale_add, static_argnums=2)
        return [functools.partial(f.lower, x, x, c) for c in SCALES]
    """
)

# A user of the library, counting every Numba compile in its process.
_USER = textwrap.dedent(
    """
    import numba.core.compiler as compiler
    compiles = []
    _compile_extra = compiler.compile_extra
    def counted(*args, **kwargs):
        compiles.append(args[2] if len(args) > 2 else kwargs.get("func"))
        return _compile_extra(*args, **kwargs)
    compiler.compile_extra = counted

    import sys
    import jax, jax.numpy as jnp, numpy as np
    import numba_cpu_ffi, scale_lib
    if len(sys.argv) > 1:
        numba_cpu_ffi.add_prebuilt_dir(sys.argv[1])
    x = jnp.arange(16, dtype=jnp.float32)
    for c in scale_lib.SCALES:
        got = jax.jit(scale_lib.scale_add, static_argnums=2)(x, x, c)
        np.testing.assert_allclose(got, c * x + x)
    print("compiles", len(compiles))
    """
)


@pytest.fixture(scope="module")
def library(built_once) -> Path:
    """The folder holding the library, once per test run (what is built
    from it once is built from this copy)."""

    def write(folder: Path) -> None:
        (folder / "scale_lib.py").write_text(_LIBRARY)

    return built_once("prebuild-library", write)


def _env(library: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CPU_FFI_PREBUILT"}
    path = os.pathsep.join([str(library), env.get("PYTHONPATH", "")])
    return {**env, "PYTHONPATH": path, **extra}


def _use(
    library: Path, *args: str, strict: bool = True, prelude: str = "", **env: str
) -> tuple[int, str]:
    result = subprocess.run(
        [sys.executable, *(["-W", "error"] if strict else []), "-c", prelude + _USER, *args],
        env=_env(library, **env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return int(result.stdout.split()[-1]), result.stderr


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in root.iterdir()}


def _copy(source: Path, path: Path) -> Path:
    shutil.copytree(source, path, copy_function=shutil.copy2)
    return path


@pytest.fixture(scope="module")
def prebuilt(library: Path, built_once) -> Path:
    """The library prebuilt by the command line (its main, in this process;
    two worker processes), once per test run: tests work on copies."""

    def prebuild(folder: Path) -> None:
        argv = ["scale_lib:kernels", "--out", str(folder / "kernels"), "--jobs", "2"]
        with (
            pytest.MonkeyPatch.context() as patch,
            contextlib.redirect_stdout(io.StringIO()) as stdout,
        ):
            patch.delenv("NUMBA_CPU_FFI_PREBUILT", raising=False)
            patch.syspath_prepend(str(library))
            assert main(argv) == 0
        # Three kernels and the one handler their call shape shares.
        assert stdout.getvalue().startswith("4 compiled entries, "), stdout.getvalue()

    return built_once("prebuild-kernels", prebuild) / "kernels"


@pytest.fixture(scope="module")
def user_cache(library: Path, built_once) -> tuple[int, Path]:
    """An empty user cache that a process without prebuilt directories
    filled, once per test run: its compile count, and the cache (tests work
    on copies)."""

    def fill(folder: Path) -> None:
        compiles, _ = _use(library, NUMBA_CPU_FFI_CACHE_DIR=str(folder / "cache"))
        (folder / "compiles").write_text(str(compiles))

    folder = built_once("prebuild-user-cache", fill)
    return int((folder / "compiles").read_text()), folder / "cache"


def test_a_prebuilt_directory_makes_a_process_compile_nothing(
    library, prebuilt, user_cache, tmp_path
):
    prebuilt = _copy(prebuilt, tmp_path / "prebuilt")
    shipped = _files(prebuilt)
    # Without it a process (the user cache's first) compiles the kernels and the handler.
    compiles, _ = user_cache
    assert compiles >= 4
    # Named by the environment, no user cache: nothing compiled.
    assert _use(library, NUMBA_CPU_FFI_CACHE_DIR="", NUMBA_CPU_FFI_PREBUILT=str(prebuilt)) == (
        0,
        "",
    )
    # Added by the library's API, beside an empty user cache that stays empty.
    user = tmp_path / "user"
    assert _use(library, str(prebuilt), NUMBA_CPU_FFI_CACHE_DIR=str(user)) == (0, "")
    assert not any(user.iterdir())
    assert _files(prebuilt) == shipped, "a prebuilt directory is never written"


def test_the_user_cache_serves_factory_kernels_across_processes(library, user_cache, tmp_path):
    first, filled = user_cache
    assert first >= 4
    user = _copy(filled, tmp_path / "user")
    assert _use(library, NUMBA_CPU_FFI_CACHE_DIR=str(user)) == (0, "")


@pytest.fixture(scope="module")
def prebuilt_portable(library: Path, built_once) -> Path:
    """The library prebuilt for the portable CPU model x86-64-v2 (through
    :func:`build`), once per test run."""
    if "x86-64-v2" not in portable_cpus():
        pytest.skip("this machine does not run x86-64-v2 code")

    def prebuild(folder: Path) -> None:
        with pytest.MonkeyPatch.context() as patch:
            patch.delenv("NUMBA_CPU_FFI_PREBUILT", raising=False)
            patch.setenv("PYTHONPATH", str(library))
            patch.syspath_prepend(str(library))
            result = build("scale_lib:kernels", folder / "kernels", jobs=2, cpu="x86-64-v2")
        assert result.entries == 4

    return built_once("prebuild-portable", prebuild) / "kernels"


# This machine, seen as one without x86-64-v2's features.
_OLD_CPU = (
    "import ffi_core.abi.native._disk_cache as disk_cache\n"
    "disk_cache.portable_cpus = lambda: ('generic',)\n"
)


def test_a_directory_built_for_a_portable_cpu_serves_machines_that_run_it(
    library, prebuilt_portable, tmp_path
):
    prebuilt = _copy(prebuilt_portable, tmp_path / "prebuilt")
    env = {"NUMBA_CPU_FFI_CACHE_DIR": "", "NUMBA_CPU_FFI_PREBUILT": str(prebuilt)}
    # Built for x86-64-v2, not for this machine's model: loaded, nothing compiled.
    assert _use(library, **env) == (0, "")
    # A machine without x86-64-v2's features does not load it: it compiles.
    compiles, _ = _use(library, prelude=_OLD_CPU, **env)
    assert compiles >= 4


def test_a_cpu_this_machine_does_not_run_is_refused(tmp_path):
    accepted = ", ".join(map(repr, portable_cpus()))
    message = (
        "`cpu` must be None (this machine's CPU model) or a portable CPU model this machine "
        f"runs code for, one of {accepted}; got 'pentium2'"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        build("mod", tmp_path / "out", cpu="pentium2")
    assert not (tmp_path / "out").exists()


def test_a_bad_prebuilt_file_is_ignored_not_deleted(library, prebuilt, tmp_path):
    prebuilt = _copy(prebuilt, tmp_path / "prebuilt")
    index = sorted(p for p in prebuilt.iterdir() if p.name.startswith("k_") and p.suffix == ".nbi")
    index[0].write_bytes(b"not a cache file")
    compiles, err = _use(
        library, strict=False, NUMBA_CPU_FFI_CACHE_DIR="", NUMBA_CPU_FFI_PREBUILT=str(prebuilt)
    )
    assert compiles == 1, err
    message = (
        f"numba-cpu-ffi's handler cache file {str(index[0])!r} does not match its checksum "
        "(truncated or corrupt); it is ignored and the handler is compiled again"
    )
    assert message in err, err
    assert index[0].read_bytes() == b"not a cache file"


def test_a_prebuilt_file_others_may_write_or_a_link_is_not_read(library, prebuilt, tmp_path):
    # Its code would run in the process: one that group or others may write,
    # or a symbolic link, is a miss, said, and left as it is.
    prebuilt = _copy(prebuilt, tmp_path / "prebuilt")
    index = sorted(p for p in prebuilt.iterdir() if p.name.startswith("k_") and p.suffix == ".nbi")
    index[0].chmod(0o666)
    target = tmp_path / "elsewhere.nbi"
    shutil.copy2(index[1], target)
    index[1].unlink()
    index[1].symlink_to(target)
    compiles, err = _use(
        library, strict=False, NUMBA_CPU_FFI_CACHE_DIR="", NUMBA_CPU_FFI_PREBUILT=str(prebuilt)
    )
    assert compiles == 2, err
    for path, reason in [
        (index[0], "may be written by group or others (mode 0666)"),
        (index[1], "is a symbolic link"),
    ]:
        message = (
            f"numba-cpu-ffi's handler cache file {str(path)!r} {reason}; it is ignored and "
            "the handler is compiled again"
        )
        assert message in err, err
    assert index[0].exists() and index[1].is_symlink()


def test_a_directory_others_may_write_is_not_read(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("NUMBA_CPU_FFI_PREBUILT", str(shared))
    message = (
        f"numba-cpu-ffi's prebuilt directory {str(shared)!r} is not read because group or "
        "others may write into it (mode 0777); prebuilt directories must be real directories "
        "that only their owner may write"
    )
    with pytest.warns(ffi_core.CacheDirWarning, match=re.escape(message)):
        assert prebuilt_dirs() == ()


@pytest.mark.parametrize(
    ("targets", "jobs", "error", "message"),
    [
        (
            "a:b:c",
            1,
            ValueError,
            "each target must be 'module' or 'module:function' (a str), got 'a:b:c'",
        ),
        (
            ["mod:"],
            1,
            ValueError,
            "each target must be 'module' or 'module:function' (a str), got 'mod:'",
        ),
        ([], 1, ValueError, "`targets` must name at least one module"),
        (
            123,
            1,
            TypeError,
            "`targets` must be 'module' or 'module:function' (a str) or a sequence of them, "
            "got int",
        ),
        ("mod", 0, ValueError, "`jobs` must be an int of at least 1, got 0"),
    ],
)
def test_bad_arguments(tmp_path, targets, jobs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        build(targets, tmp_path / "out", jobs=jobs)


def test_out_must_be_a_path():
    with pytest.raises(
        TypeError, match=re.escape("`out` must be a directory path (str or os.PathLike), got None")
    ):
        build("mod:f", None)  # type: ignore[arg-type]


def test_workers_read_no_prebuilt_directory(tmp_path, monkeypatch):
    # A kernel a prebuilt directory holds (named in the caller's environment,
    # or added by the library at import) would be a hit in a worker, and
    # nothing would be compiled into `out`: the workers read none.
    from numba_cpu_ffi import _cache, add_prebuilt_dir, prebuild

    shipped = tmp_path / "shipped"
    shipped.mkdir(mode=0o700)
    monkeypatch.setenv("NUMBA_CPU_FFI_PREBUILT", str(shipped))
    monkeypatch.setattr(_cache, "_added", [])
    monkeypatch.setattr(_cache, "_read_prebuilt", True)
    add_prebuilt_dir(shipped)
    assert prebuilt_dirs() == (shipped,)

    launched = []

    class Worker:
        returncode = 0

        def __init__(self, argv, env, **kwargs):
            launched.append(env)

        def communicate(self):
            return "", None

    monkeypatch.setattr(prebuild.subprocess, "Popen", Worker)
    build("mod:f", tmp_path / "out", jobs=2)
    assert [env.get("NUMBA_CPU_FFI_PREBUILT") for env in launched] == [None, None]
    assert {env["NUMBA_CPU_FFI_CACHE_DIR"] for env in launched} == {str(tmp_path / "out")}

    # The worker itself: what the library adds at import is not read either.
    monkeypatch.setattr(
        prebuild, "importlib", types.SimpleNamespace(import_module=lambda name: object())
    )
    prebuild._run_worker("mod", "0/1")
    assert prebuilt_dirs() == ()


def test_a_relative_out_is_the_directory_below_the_current_one(tmp_path, monkeypatch):
    from numba_cpu_ffi import prebuild

    monkeypatch.chdir(tmp_path)
    launched = []

    class Worker:
        returncode = 0

        def __init__(self, argv, env, **kwargs):
            launched.append(env["NUMBA_CPU_FFI_CACHE_DIR"])

        def communicate(self):
            return "", None

    monkeypatch.setattr(prebuild.subprocess, "Popen", Worker)
    assert build("mod:f", "kernels").out == tmp_path / "kernels"
    assert launched == [str(tmp_path / "kernels")]


def test_a_failing_worker_is_reported(tmp_path, library, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(library))
    monkeypatch.syspath_prepend(str(library))
    with pytest.raises(
        PrebuildError,
        match=r"^prebuilding failed in scale_lib:missing \(worker 1 of 1\), exit 1:\n",
    ):
        build("scale_lib:missing", tmp_path / "out")
