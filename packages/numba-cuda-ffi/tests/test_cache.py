"""The disk cache of compiled kernels: a second process loads a kernel's PTX
and cubin without compiling (numba-cuda's compile_ptx is counted), kernels
from a factory too; a bad entry is a miss with a warning and is rewritten; a
directory others may write is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ffi_core import CacheDirWarning
from ffi_core.bridge.cuda import ArtifactCacheWarning
from ffi_core.bridge.cuda._artifact_cache import _checksum
from ffi_core.testing import whole_message
from numba import cuda
from numba_cuda_ffi import _compile
from numba_cuda_ffi._compile import compile_kernel
from numba_cuda_ffi._spec import ArraySig, KernelInfo

ARRAYS = (ArraySig("float32", 1), ArraySig("float32", 1))
CC = (8, 0)

JOB = """\
import hashlib, json, sys
from numba import cuda
from numba_cuda_ffi._compile import compile_kernel
from numba_cuda_ffi._spec import ArraySig, KernelInfo

compiles = []
real = cuda.compile_ptx
def counting(*args, **kwargs):
    compiles.append(args[0].__name__)
    return real(*args, **kwargs)
cuda.compile_ptx = counting

def factory(c):
    @cuda.jit
    def scale(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] * c
    return scale

arrays = (ArraySig("float32", 1), ArraySig("float32", 1))
images = [
    hashlib.sha256(compile_kernel(KernelInfo(factory(c)), arrays, (8, 0)).image).hexdigest()
    for c in map(float, sys.argv[1:])
]
print(json.dumps({"compiles": len(compiles), "images": images}))
"""


def _run(directory: Path, job: Path, *factors: str) -> dict:
    env = dict(os.environ, NUMBA_CUDA_FFI_CACHE_DIR=str(directory))
    done = subprocess.run(
        [sys.executable, str(job), *factors], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_second_process_loads_without_compiling(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    directory = tmp_path / "cache"
    first = _run(directory, job, "2", "3")
    assert first["compiles"] == 2
    assert len(list(directory.glob("*.json"))) == 2
    again = _run(directory, job, "2", "3", "4")  # 4: a new closure value, compiled
    assert again["compiles"] == 1
    assert again["images"][:2] == first["images"]
    assert len(set(again["images"])) == 3


@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[()] * x[i] + y[i]


AXPY = (ArraySig("float32", 0), *ARRAYS, ArraySig("float32", 1))


@pytest.fixture
def directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("NUMBA_CUDA_FFI_CACHE_DIR", str(path))
    compile_kernel.cache_clear()
    yield path
    compile_kernel.cache_clear()


def _count_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = cuda.compile_ptx

    def counting(fn, *args, **kwargs):
        calls.append(fn.__name__)
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(cuda, "compile_ptx", counting)
    return calls


def _rewritten(path: Path, **fields: object) -> str:
    data = json.loads(path.read_text())
    data["payload"]["fields"].update(fields)
    data["checksum"] = _checksum(data["payload"])
    return json.dumps(data)


def _corruptions(path: Path) -> dict[str, tuple[str, str]]:
    text = path.read_text()
    ptx = json.loads(text)["payload"]["fields"]["ptx"]
    entry = _compile.ptx_entry(ptx)
    return {
        "truncated": (text[: len(text) // 3], "is not valid JSON (truncated or corrupt)"),
        "wrong-type": (_rewritten(path, entry=7), "has a field 'entry' that is not a str"),
        "other-entry": (
            _rewritten(path, entry="other"),
            f"names entry 'other', but its PTX has {entry!r}",
        ),
        "other-arch": (
            _rewritten(path, ptx=ptx.replace(".target sm_80", ".target sm_90")),
            "holds PTX that is not for sm_80",
        ),
        "other-params": (
            _rewritten(path, ptx=ptx.replace(".param .u64", ".param .u32", 1)),
            "holds PTX that does not fit: kernel 'axpy' has PTX parameters of sizes "
            f"(4, {', '.join(['8'] * 25)}), not the 26 8-byte values of Numba's array ABI for "
            "4 arrays; this numba-cuda version lays out kernel arguments differently",
        ),
        "image": (
            _rewritten(path, image="AAAA"),
            "holds an image that is neither a cubin nor its PTX",
        ),
    }


@pytest.mark.parametrize(
    "corruption", ["truncated", "wrong-type", "other-entry", "other-arch", "other-params", "image"]
)
def test_a_bad_entry_is_a_miss_with_a_warning_and_rewritten(
    directory: Path, monkeypatch: pytest.MonkeyPatch, corruption: str
) -> None:
    info = KernelInfo(axpy)
    first = compile_kernel(info, AXPY, CC)
    (path,) = directory.glob("*.json")
    written, reason = _corruptions(path)[corruption]
    path.write_text(written)
    compile_kernel.cache_clear()
    calls = _count_compiles(monkeypatch)
    message = (
        f"numba-cuda-ffi's kernel cache file {str(path)!r} {reason}; the kernel is compiled "
        "again and the file rewritten"
    )
    with pytest.warns(ArtifactCacheWarning, match=whole_message(message)):
        again = compile_kernel(info, AXPY, CC)
    assert calls == ["axpy"]
    # numba-cuda numbers each compile of a function in its PTX names.
    assert (again.layout, again.cc) == (first.layout, first.cc)
    assert again.image.startswith(b"\x7fELF")
    compile_kernel.cache_clear()
    assert compile_kernel(info, AXPY, CC) == again  # the rewritten entry, no warning
    assert calls == ["axpy"]


def test_ptx_without_a_linker_is_cached(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_compile, "_link_cubin", lambda ptx, cc, options: None)
    first = compile_kernel(KernelInfo(axpy), AXPY, CC)
    assert first.image == first.ptx.encode() + b"\0"
    compile_kernel.cache_clear()
    calls = _count_compiles(monkeypatch)
    assert compile_kernel(KernelInfo(axpy), AXPY, CC) == first
    assert calls == []


def test_a_cache_directory_others_may_write_is_refused(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory.mkdir()
    directory.chmod(0o777)
    message = (
        "numba-cuda-ffi's kernel cache ($NUMBA_CUDA_FFI_CACHE_DIR) is not kept on disk: the "
        f"directory {str(directory)!r} is refused because group or others may write into it "
        "(mode 0777). Use a directory that only you own and may write (mode 0700), or remove "
        "this one so it is created anew."
    )
    with pytest.warns(CacheDirWarning, match=whole_message(message)):
        compiled = compile_kernel(KernelInfo(axpy), AXPY, CC)
    assert compiled.image.startswith(b"\x7fELF")
    assert not list(directory.iterdir())


def test_an_empty_variable_means_no_disk_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NUMBA_CUDA_FFI_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    compile_kernel.cache_clear()
    calls = _count_compiles(monkeypatch)
    compile_kernel(KernelInfo(axpy), AXPY, CC)
    compile_kernel.cache_clear()
    compile_kernel(KernelInfo(axpy), AXPY, CC)
    assert calls == ["axpy", "axpy"]
    assert not list(tmp_path.iterdir())
