"""The disk cache of compiled Triton kernels: a second process loads the cubin
and launch metadata without compiling (Triton's front end is counted); a bad
entry is a miss with a warning and is rewritten; a directory others may write
is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from ffi_core import CacheDirWarning  # noqa: E402
from ffi_core.bridge.cuda import ArtifactCacheWarning  # noqa: E402
from ffi_core.bridge.cuda._artifact_cache import _checksum  # noqa: E402
from ffi_core.testing import whole_message  # noqa: E402
from triton.compiler.compiler import ASTSource  # noqa: E402
from triton_ffi import _compile  # noqa: E402
from triton_ffi._compile import compile_triton  # noqa: E402

JOB = """\
import hashlib, json, sys
import triton
import triton.language as tl
from triton.compiler.compiler import ASTSource
from triton_ffi import compile_triton

compiles = []
real = ASTSource.make_ir
def counting(self, *args, **kwargs):
    compiles.append(self.fn.__name__)
    return real(self, *args, **kwargs)
ASTSource.make_ir = counting

@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)

sig = {"x": "*float32", "y": "*float32", "out": "*float32", "n": "int32"}
built = [compile_triton(add, sig, {"BLOCK": int(b)}, cc=(8, 0)) for b in sys.argv[1:]]
print(json.dumps({
    "compiles": len(compiles),
    "cubins": [hashlib.sha256(c.cubin).hexdigest() for c in built],
    "launch": [[c.entry, c.num_warps, c.shared_mem, list(c.param_sizes)] for c in built],
}))
"""


def _run(directory: Path, job: Path, *blocks: str) -> dict:
    env = dict(os.environ, TRITON_FFI_CACHE_DIR=str(directory))
    done = subprocess.run(
        [sys.executable, str(job), *blocks], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_second_process_loads_without_compiling(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    directory = tmp_path / "cache"
    first = _run(directory, job, "128", "256")
    assert first["compiles"] == 2
    assert len(list(directory.glob("*.json"))) == 2
    again = _run(directory, job, "128", "256", "512")  # 512: a new constexpr, compiled
    assert again["compiles"] == 1
    assert again["cubins"][:2] == first["cubins"]
    assert again["launch"][:2] == first["launch"]
    assert len(set(again["cubins"])) == 3


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out + offs, tl.load(x + offs, mask=mask) + tl.load(y + offs, mask=mask), mask=mask)


SIG = {"x": "*float32", "y": "*float32", "out": "*float32", "n": "int32"}


def _compile_add():
    return compile_triton(add, SIG, {"BLOCK": 128}, cc=(8, 0))


@pytest.fixture
def directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("TRITON_FFI_CACHE_DIR", str(path))
    _compile._compile_cached.cache_clear()
    yield path
    _compile._compile_cached.cache_clear()


def _count_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = ASTSource.make_ir

    def counting(self, *args, **kwargs):
        calls.append(self.fn.__name__)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ASTSource, "make_ir", counting)
    return calls


def _rewritten(path: Path, **fields: object) -> str:
    data = json.loads(path.read_text())
    data["payload"]["fields"].update(fields)
    data["checksum"] = _checksum(data["payload"])
    return json.dumps(data)


def _corruptions(path: Path) -> dict[str, tuple[str, str]]:
    text = path.read_text()
    stored = json.loads(text)["payload"]["fields"]
    ptx, entry = stored["ptx"], stored["entry"]
    return {
        "truncated": (text[:100], "is not valid JSON (truncated or corrupt)"),
        "wrong-type": (
            _rewritten(path, num_warps="4"),
            "has a field 'num_warps' that is not an int in [1, 64]",
        ),
        "out-of-range": (
            _rewritten(path, shared_mem=-1),
            "has a field 'shared_mem' that is not an int in [0, 2147483647]",
        ),
        "cubin": (
            _rewritten(path, cubin="AAAA"),
            "has a field 'cubin' that is not base64 of bytes starting with b'\\x7fELF'",
        ),
        "other-arch": (
            _rewritten(path, ptx=ptx.replace(".target sm_80", ".target sm_90")),
            "holds PTX that is not for sm_80",
        ),
        "other-entry": (
            _rewritten(path, entry="other"),
            f"holds PTX that does not fit: kernel 'add': the PTX has no entry 'other'; it has "
            f"[{entry!r}]",
        ),
        "other-params": (
            _rewritten(path, ptx=ptx.replace(".param .u64", ".param .u32", 1)),
            f"holds PTX that does not fit: kernel 'add': PTX entry {entry!r} takes parameters "
            "of [4, 8, 8, 4, 8, 8] bytes, but the declared layout is [('x', 8), ('y', 8), "
            "('out', 8), ('n', 4), ('global_scratch', 8), ('profile_scratch', 8)]",
        ),
    }


@pytest.mark.parametrize(
    "corruption",
    [
        "truncated",
        "wrong-type",
        "out-of-range",
        "cubin",
        "other-arch",
        "other-entry",
        "other-params",
    ],
)
def test_a_bad_entry_is_a_miss_with_a_warning_and_rewritten(
    directory: Path, monkeypatch: pytest.MonkeyPatch, corruption: str
) -> None:
    first = _compile_add()
    (path,) = directory.glob("*.json")
    written, reason = _corruptions(path)[corruption]
    path.write_text(written)
    _compile._compile_cached.cache_clear()
    calls = _count_compiles(monkeypatch)
    message = (
        f"triton-ffi's kernel cache file {str(path)!r} {reason}; the kernel is compiled again "
        "and the file rewritten"
    )
    with pytest.warns(ArtifactCacheWarning, match=whole_message(message)):
        again = _compile_add()
    assert calls == ["add"]
    assert again == first
    _compile._compile_cached.cache_clear()
    assert _compile_add() == first  # the rewritten entry, without a warning
    assert calls == ["add"]


def test_the_launch_metadata_comes_back(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = compile_triton(add, SIG, {"BLOCK": 1024}, cc=(9, 0), num_warps=8, aligned=False)
    _compile._compile_cached.cache_clear()
    calls = _count_compiles(monkeypatch)
    loaded = compile_triton(add, SIG, {"BLOCK": 1024}, cc=(9, 0), num_warps=8, aligned=False)
    assert calls == []
    assert loaded == first and loaded is not first
    assert (loaded.block, loaded.pointer_align) == ((256, 1, 1), 1)
    # Another option is another entry.
    compile_triton(add, SIG, {"BLOCK": 1024}, cc=(9, 0), num_warps=8, aligned=True)
    assert calls == ["add"]
    assert len(list(directory.glob("*.json"))) == 2


def test_a_cache_directory_others_may_write_is_refused(directory: Path) -> None:
    directory.mkdir()
    directory.chmod(0o777)
    message = (
        "triton-ffi's kernel cache ($TRITON_FFI_CACHE_DIR) is not kept on disk: the directory "
        f"{str(directory)!r} is refused because group or others may write into it (mode 0777). "
        "Use a directory that only you own and may write (mode 0700), or remove this one so "
        "it is created anew."
    )
    with pytest.warns(CacheDirWarning, match=whole_message(message)):
        compiled = _compile_add()
    assert compiled.cubin.startswith(b"\x7fELF")
    assert not list(directory.iterdir())


def test_an_empty_variable_means_no_disk_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_FFI_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _compile._compile_cached.cache_clear()
    calls = _count_compiles(monkeypatch)
    _compile_add()
    _compile._compile_cached.cache_clear()
    _compile_add()
    assert calls == ["add", "add"]
    assert not list(tmp_path.iterdir())
