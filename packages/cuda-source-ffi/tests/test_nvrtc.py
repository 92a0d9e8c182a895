"""NVRTC compiles CUDA C++ to PTX and cubin without a GPU: entries, parameter
sizes, lowered C++ names, error logs, argument checks and both caches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cuda_source_ffi import _nvrtc, _nvrtc_library
from cuda_source_ffi._nvrtc import (
    CompiledSource,
    NvrtcCacheWarning,
    NvrtcCompileError,
    compile_source,
    entry_params,
    nvrtc_version,
)

try:
    _nvrtc._library()
except ImportError as e:
    pytest.skip(f"NVRTC is not installed: {e}", allow_module_level=True)

from ffi_core import CacheDirWarning
from ffi_core.bridge.cuda._artifact_cache import _checksum
from ffi_core.testing import whole_message

AXPY = """\
extern "C" __global__ void axpy(const float* x, const float* y, float* out, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
"""

SCALE = """\
template <typename T>
__global__ void scale(T* x, T a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""

ELF_MAGIC = b"\x7fELF"


@pytest.fixture(autouse=True)
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test gets its own disk cache and an empty in-memory one."""
    path = tmp_path / "cache"
    monkeypatch.setenv("CUDA_SOURCE_FFI_CACHE_DIR", str(path))
    _nvrtc._clear_memory_cache()
    yield path
    _nvrtc._clear_memory_cache()


def _count_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record each real NVRTC compile (by source name) while still running it."""
    calls: list[str] = []
    real = _nvrtc._compile

    def counting(source, name, *args):
        calls.append(name)
        return real(source, name, *args)

    monkeypatch.setattr(_nvrtc, "_compile", counting)
    return calls


def test_version() -> None:
    major, minor = nvrtc_version()
    assert major >= 12 and minor >= 0


@pytest.mark.parametrize("arch", [(8, 0), (9, 0)])
def test_extern_c_kernel(arch: tuple[int, int]) -> None:
    compiled = compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=arch)
    assert isinstance(compiled, CompiledSource)
    assert compiled.name == "axpy.cu" and compiled.arch == arch
    assert compiled.entries == {"axpy": "axpy"}
    assert ".entry axpy(" in compiled.ptx
    assert f".target sm_{arch[0]}{arch[1]}" in compiled.ptx
    assert compiled.cubin.startswith(ELF_MAGIC)
    assert entry_params(compiled, "axpy") == (8, 8, 8, 4, 4)
    assert compiled.log == ""


def test_template_kernels_lowered_names() -> None:
    compiled = compile_source(
        SCALE, name="scale.cu", kernels=("scale<float>", "scale<double>"), arch=(8, 0)
    )
    assert compiled.entries == {
        "scale<float>": "_Z5scaleIfEvPT_S0_i",
        "scale<double>": "_Z5scaleIdEvPT_S0_i",
    }
    for lowered in compiled.entries.values():
        assert f".entry {lowered}(" in compiled.ptx
    assert entry_params(compiled, "scale<float>") == (8, 4, 4)
    assert entry_params(compiled, "scale<double>") == (8, 8, 4)


def test_namespaced_kernel() -> None:
    source = "namespace ops { __global__ void fill(int* x, int v) { x[0] = v; } }\n"
    compiled = compile_source(source, name="ns.cu", kernels=["ops::fill"], arch=(9, 0))
    assert compiled.entries == {"ops::fill": "_ZN3ops4fillEPii"}
    assert entry_params(compiled, "ops::fill") == (8, 4)


def test_ptx_from_a_virtual_arch_when_sm_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVRTC versions that give no PTX for sm_XY: a second compile for compute_XY does."""
    real = _nvrtc._run_nvrtc
    arches: list[str] = []

    def sm_without_ptx(source, name, kernels, options):
        arches.append(options[0])
        result = real(source, name, kernels, options)
        if "sm_" in options[0]:
            result.ptx = ""
        return result

    monkeypatch.setattr(_nvrtc, "_run_nvrtc", sm_without_ptx)
    compiled = compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=(9, 0))
    assert arches == ["--gpu-architecture=sm_90", "--gpu-architecture=compute_90"]
    assert compiled.cubin.startswith(ELF_MAGIC)
    assert entry_params(compiled, "axpy") == (8, 8, 8, 4, 4)


def test_entry_params_unknown_kernel() -> None:
    compiled = compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=(8, 0))
    with pytest.raises(ValueError) as info:
        entry_params(compiled, "saxpy")
    assert str(info.value) == "kernel 'saxpy' was not compiled in 'axpy.cu'; it has ['axpy']"


def test_warnings_are_in_the_log() -> None:
    source = "__global__ void k(int n) {\n    int unused;\n}\n"
    compiled = compile_source(source, name="warn.cu", kernels=["k"], arch=(8, 0))
    assert 'warn.cu(2): warning #177-D: variable "unused" was declared but never referenced' in (
        compiled.log
    )


def test_syntax_error_log_has_the_line() -> None:
    source = "// a comment\n__global__ void k(float* x) {\n    x[0] = ;\n}\n"
    with pytest.raises(NvrtcCompileError) as info:
        compile_source(source, name="broken.cu", kernels=["k"], arch=(8, 0))
    log = info.value.log
    assert log.startswith("broken.cu(3): error: expected an expression\n")
    assert log.endswith('1 error detected in the compilation of "broken.cu".')
    assert str(info.value) == f"NVRTC could not compile 'broken.cu' for sm_80:\n{log}"


def test_missing_kernel_names() -> None:
    with pytest.raises(NvrtcCompileError) as info:
        compile_source(AXPY, name="axpy.cu", kernels=["axpy", "nope", "other<int>"], arch=(8, 0))
    log = info.value.log
    assert 'Input name expression was: " nope"' in log
    assert str(info.value) == (
        "NVRTC found no __global__ kernel named ['nope', 'other<int>'] in 'axpy.cu' for sm_80; "
        "each of `kernels` must name a __global__ function or a template instantiation of one, "
        f"e.g. 'axpy' or 'scale<float>':\n{log}"
    )


def test_device_function_is_not_a_kernel() -> None:
    source = AXPY + "__device__ float twice(float v) { return 2 * v; }\n"
    with pytest.raises(NvrtcCompileError, match=r"no __global__ kernel named \['twice'\]"):
        compile_source(source, name="axpy.cu", kernels=["axpy", "twice"], arch=(8, 0))


def _supported_message(arch: tuple[int, int]) -> str:
    version = ".".join(map(str, nvrtc_version()))
    supported = ", ".join(str(a) for a in _nvrtc._supported_archs())
    return f"arch {arch!r} is not supported by NVRTC {version}; it supports {supported}"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"source": b"x"}, TypeError, "source must be a str of CUDA C++, got bytes"),
        ({"name": ""}, TypeError, "name must be a non-empty str, got ''"),
        ({"name": 3}, TypeError, "name must be a non-empty str, got 3"),
        (
            {"kernels": []},
            ValueError,
            "kernels must name at least one kernel, and no name may be blank",
        ),
        (
            {"kernels": ["axpy", " "]},
            ValueError,
            "kernels must name at least one kernel, and no name may be blank",
        ),
        (
            {"kernels": "axpy"},
            TypeError,
            "kernels must be a sequence of str (a list or tuple), got str",
        ),
        ({"kernels": ["axpy", 1]}, TypeError, "kernels must contain only str, got 1"),
        (
            {"arch": [9, 0]},
            TypeError,
            "arch must be a tuple of two ints such as (9, 0), got [9, 0]",
        ),
        (
            {"arch": (9, 0, 0)},
            TypeError,
            "arch must be a tuple of two ints such as (9, 0), got (9, 0, 0)",
        ),
        (
            {"arch": (9.0, 0)},
            TypeError,
            "arch must be a tuple of two ints such as (9, 0), got (9.0, 0)",
        ),
        (
            {"arch": (4, 0)},
            ValueError,
            "arch must be a compute capability (major, minor) >= (5, 0) with minor 0-9, got (4, 0)",
        ),
        (
            {"arch": (9, 10)},
            ValueError,
            "arch must be a compute capability (major, minor) >= (5, 0) with minor 0-9, "
            "got (9, 10)",
        ),
        (
            {"options": "-G"},
            TypeError,
            "options must be a sequence of str (a list or tuple), got str",
        ),
        ({"options": ["-G", 3]}, TypeError, "options must contain only str, got 3"),
        (
            {"options": ["-arch=sm_90"]},
            ValueError,
            "options must not set the architecture (['-arch=sm_90']); pass arch instead",
        ),
        (
            {"include_dirs": "include"},
            TypeError,
            "include_dirs must be a sequence of directory paths (str or PathLike)",
        ),
    ],
)
def test_argument_errors(kwargs: dict, error: type[Exception], message: str) -> None:
    args = {"source": AXPY, "name": "axpy.cu", "kernels": ["axpy"], "arch": (8, 0)} | kwargs
    source = args.pop("source")
    with pytest.raises(error) as info:
        compile_source(source, **args)
    assert type(info.value) is error
    assert str(info.value) == message


def test_unsupported_arch() -> None:
    with pytest.raises(ValueError) as info:
        compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=(9, 9))
    assert str(info.value) == _supported_message((9, 9))


def test_memory_cache_returns_the_same_object(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_compiles(monkeypatch)
    first = compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=(8, 0))
    again = compile_source(AXPY, name="axpy.cu", kernels=("axpy",), arch=(8, 0))
    assert again is first
    other = compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=(9, 0))
    assert other is not first
    assert calls == ["axpy.cu", "axpy.cu"]


def test_disk_cache_used_by_a_fresh_process(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=(8, 0))
    files = list(cache_dir.glob("*.json"))
    assert len(files) == 1
    assert not list(cache_dir.glob("*.tmp"))

    _nvrtc._clear_memory_cache()
    calls = _count_compiles(monkeypatch)
    loaded = compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=(8, 0))
    assert calls == []
    assert loaded == first and loaded is not first


JOB = """\
import hashlib, json, sys
from cuda_source_ffi import _nvrtc

compiles = []
real = _nvrtc._run_nvrtc
def counting(source, name, *args):
    compiles.append(name)
    return real(source, name, *args)
_nvrtc._run_nvrtc = counting

source = sys.stdin.read()
built = [_nvrtc.compile_source(source, name="axpy.cu", kernels=["axpy"], arch=(8, a))
         for a in map(int, sys.argv[1:])]
print(json.dumps({"compiles": compiles, "cubins": [hashlib.sha256(c.cubin).hexdigest()
                                                   for c in built]}))
"""


def test_a_second_process_compiles_nothing(tmp_path: Path, cache_dir: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    env = dict(os.environ, CUDA_SOURCE_FFI_CACHE_DIR=str(cache_dir))

    def run(*minors: str) -> dict:
        done = subprocess.run(
            [sys.executable, str(job), *minors],
            input=AXPY, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    first = run("0")
    assert first["compiles"] == ["axpy.cu"]
    again = run("0", "6")  # sm_86: not cached yet
    assert again["compiles"] == ["axpy.cu"]
    assert again["cubins"][0] == first["cubins"][0]
    assert len(list(cache_dir.glob("*.json"))) == 2


TWO = AXPY + 'extern "C" __global__ void other(float* x) { x[0] = 1; }\n'


def _rewritten(
    path: Path, *, kind: str | None = None, key: str | None = None, drop: str = "", **fields: object
) -> str:
    """The entry at ``path`` with its kind, key or fields changed (``drop``: a
    field removed) and a matching checksum."""
    data = json.loads(path.read_text())
    payload = data["payload"]
    payload["fields"].update(fields)
    payload["fields"].pop(drop, None)
    payload["kind"] = kind or payload["kind"]
    payload["key"] = key or payload["key"]
    data["checksum"] = _checksum(payload)
    return json.dumps(data)


def _corruptions(path: Path) -> dict[str, tuple[str, str]]:
    """name -> (what to write over the entry, the end of the warning naming it)."""
    text = path.read_text()
    data = json.loads(text)
    payload = data["payload"]
    plain = dict(data, checksum="0" * 64)
    stored = payload["fields"]
    cubin = "has a field 'cubin' that is not base64 of bytes starting with b'\\x7fELF'"
    return {
        "not-json": ("{not json", "is not valid JSON (truncated or corrupt)"),
        "empty": ("", "is not valid JSON (truncated or corrupt)"),
        "truncated": (text[: len(text) // 2], "is not valid JSON (truncated or corrupt)"),
        "a-list": ("[]", "is not an entry of this cache (its fields differ)"),
        "old-format": (json.dumps(dict(data, format=0)), "has format 0, not 1"),
        "payload-fields": (
            json.dumps(dict(data, payload={"key": path.stem})),
            "is not an entry of this cache (its payload's fields differ)",
        ),
        "checksum": (
            json.dumps(dict(plain, payload=dict(payload, fields=dict(stored, ptx="")))),
            "does not match its checksum",
        ),
        "other-kind": (
            _rewritten(path, kind="Triton kernel"),
            "holds a 'Triton kernel', not a 'NVRTC compile'",
        ),
        "missing-field": (
            _rewritten(path, drop="log"),
            "has the fields ['cubin', 'lowered', 'name', 'ptx'], not "
            "['cubin', 'log', 'lowered', 'name', 'ptx']",
        ),
        "wrong-type": (
            _rewritten(path, lowered="axpy"),
            "has a field 'lowered' that is not a list of str",
        ),
        "other-key": (
            _rewritten(path, key="0" * 64),
            "holds the entry of another compile (its key differs from its name)",
        ),
        "other-arch": (
            _rewritten(path, ptx=stored["ptx"].replace(".target sm_80", ".target sm_90")),
            "holds PTX that is not for sm_80",
        ),
        "cubin-base64": (_rewritten(path, cubin="!!"), cubin),
        "cubin-elf": (_rewritten(path, cubin="AAAA"), cubin),
        "missing-kernel": (
            _rewritten(path, lowered=[]),
            "holds 0 lowered names, not one for each of ['axpy']",
        ),
        "other-entry": (
            _rewritten(path, lowered=["other"]),
            "names 'other' as the entry of kernel 'axpy', which is not a matching .entry of "
            "its PTX",
        ),
        "absent-entry": (
            _rewritten(path, lowered=["axpy2"]),
            "names 'axpy2' as the entry of kernel 'axpy', which is not a matching .entry of "
            "its PTX",
        ),
    }


@pytest.mark.parametrize(
    "corruption",
    [
        "not-json", "empty", "truncated", "a-list", "old-format", "payload-fields", "checksum",
        "other-kind", "missing-field", "wrong-type", "other-key", "other-arch", "cubin-base64",
        "cubin-elf", "missing-kernel", "other-entry", "absent-entry",
    ],
)  # fmt: skip
def test_a_bad_disk_cache_entry_is_a_miss_and_rewritten(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch, corruption: str
) -> None:
    first = compile_source(TWO, name="two.cu", kernels=["axpy"], arch=(8, 0))
    (path,) = cache_dir.glob("*.json")
    written, reason = _corruptions(path)[corruption]
    path.write_text(written)
    _nvrtc._clear_memory_cache()
    calls = _count_compiles(monkeypatch)
    message = (
        f"cuda-source-ffi's NVRTC cache file {str(path)!r} {reason}; the source is compiled "
        "again and the file rewritten"
    )
    with pytest.warns(NvrtcCacheWarning, match=whole_message(message)):
        again = compile_source(TWO, name="two.cu", kernels=["axpy"], arch=(8, 0))
    assert calls == ["two.cu"]
    assert again == first
    assert entry_params(again, "axpy") == (8, 8, 8, 4, 4)
    _nvrtc._clear_memory_cache()  # the rewritten entry is used, without a warning
    assert compile_source(TWO, name="two.cu", kernels=["axpy"], arch=(8, 0)) == first
    assert calls == ["two.cu"]
    assert not list(cache_dir.glob("*.tmp"))


def test_an_unreadable_entry_is_a_miss(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=(8, 0))
    (path,) = cache_dir.glob("*.json")
    path.write_bytes(b"\xff\xfe")
    _nvrtc._clear_memory_cache()
    message = (
        f"cuda-source-ffi's NVRTC cache file {str(path)!r} cannot be read ('utf-8' codec can't "
        "decode byte 0xff in position 0: invalid start byte); the source is compiled again and "
        "the file rewritten"
    )
    with pytest.warns(NvrtcCacheWarning, match=whole_message(message)):
        compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=(8, 0))


def test_the_cache_directory_follows_xdg_and_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CUDA_SOURCE_FFI_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=(8, 0))
    directory = tmp_path / "xdg" / "cuda-source-ffi"
    assert len(list(directory.glob("*.json"))) == 1
    assert directory.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("configured", [True, False])
def test_a_cache_directory_others_may_write_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, configured: bool
) -> None:
    directory = tmp_path / "shared"
    if configured:
        monkeypatch.setenv("CUDA_SOURCE_FFI_CACHE_DIR", str(directory))
    else:
        monkeypatch.delenv("CUDA_SOURCE_FFI_CACHE_DIR")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
        directory = tmp_path / "cuda-source-ffi"
    directory.mkdir()
    directory.chmod(0o777)
    message = (
        "cuda-source-ffi's NVRTC cache ($CUDA_SOURCE_FFI_CACHE_DIR) is not kept on disk: the "
        f"directory {str(directory)!r} is refused because group or others may write into it (mode 0777). Use a directory "
        "that only you own and may write (mode 0700), or remove this one so it is created anew."
    )
    with pytest.warns(CacheDirWarning, match=whole_message(message)):
        compiled = compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=(8, 0))
    assert compiled.cubin.startswith(ELF_MAGIC)
    assert not list(directory.iterdir())


def test_an_empty_cache_variable_means_no_disk_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_SOURCE_FFI_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = _count_compiles(monkeypatch)
    compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=(8, 0))
    _nvrtc._clear_memory_cache()
    compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=(8, 0))
    assert calls == ["axpy.cu", "axpy.cu"]
    assert not list(tmp_path.iterdir())


def test_include_dirs_are_cached_in_memory_only(tmp_path: Path, cache_dir: Path) -> None:
    headers = tmp_path / "include"
    headers.mkdir()
    (headers / "twice.cuh").write_text("__device__ inline float twice(float v) { return 2 * v; }\n")
    source = '#include "twice.cuh"\n__global__ void k(float* x) { x[0] = twice(x[0]); }\n'
    compiled = compile_source(
        source, name="inc.cu", kernels=["k"], arch=(8, 0), include_dirs=[headers]
    )
    assert compiled.cubin.startswith(ELF_MAGIC)
    assert not cache_dir.exists() or not list(cache_dir.iterdir())


def test_environment_is_left_alone() -> None:
    before = dict(os.environ)
    compile_source(AXPY, name="axpy.cu", kernels=["axpy"], arch=(8, 0))
    assert dict(os.environ) == before


def test_missing_library_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_nvrtc_library, "_candidate_paths", lambda: ["/nonexistent/libnvrtc.so.13"])
    with pytest.raises(ImportError) as info:
        _nvrtc._library.__wrapped__()
    message = str(info.value)
    assert message.startswith("cuda-source-ffi needs NVRTC")
    assert message.endswith(
        'install it with `pip install "cuda-source-ffi[cu13]"` (from wheels built from the '
        'repository: `pip install --find-links DIR "cuda-source-ffi[cu13]"`; in a uv project: '
        '`uv add "cuda-source-ffi[cu13]"`) for CUDA 13, or the same with '
        '"cuda-source-ffi[cu12]" for CUDA 12'
    )


INCLUDES_TWICE = '#include "twice.cuh"\n__global__ void k(float* x) { x[0] = twice(x[0]); }\n'


def test_a_changed_header_is_compiled_again(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The header's content, not only its directory, decides the result.
    include = tmp_path / "include"
    include.mkdir()
    nested = include / "factor.cuh"
    nested.write_text("#define FACTOR 2\n")
    (include / "twice.cuh").write_text(
        '#include "factor.cuh"\n__device__ inline float twice(float v) { return FACTOR * v; }\n'
    )
    calls = _count_compiles(monkeypatch)
    kwargs = {"name": "inc.cu", "kernels": ["k"], "arch": (8, 0)}
    first = compile_source(INCLUDES_TWICE, **kwargs, options=[f"-I{include}"])
    assert compile_source(INCLUDES_TWICE, **kwargs, options=[f"-I{include}"]) is first
    nested.write_text("#define FACTOR 3\n")  # reached through twice.cuh
    second = compile_source(INCLUDES_TWICE, **kwargs, options=[f"-I{include}"])
    assert calls == ["inc.cu", "inc.cu"]
    assert second.ptx != first.ptx
    assert not cache_dir.exists() or not list(cache_dir.iterdir())


def test_headers_found_in_the_working_directory_count(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NVRTC finds a quoted include in the working directory without any -I.
    monkeypatch.chdir(tmp_path)
    header = tmp_path / "twice.cuh"
    header.write_text("__device__ inline float twice(float v) { return 2 * v; }\n")
    kwargs = {"name": "inc.cu", "kernels": ["k"], "arch": (8, 0)}
    first = compile_source(INCLUDES_TWICE, **kwargs)
    header.write_text("__device__ inline float twice(float v) { return 3 * v; }\n")
    assert compile_source(INCLUDES_TWICE, **kwargs).ptx != first.ptx
    assert not cache_dir.exists() or not list(cache_dir.iterdir())  # in memory only


def test_headers_of_a_source() -> None:
    plain = _nvrtc.headers(AXPY)
    assert not plain.from_disk
    assert not _nvrtc.headers("#include <cuda_fp16.h>\n" + AXPY).from_disk  # NVRTC's own
    assert _nvrtc.headers("#define H <x.h>\n#include H\n").from_disk  # cannot be followed
    assert _nvrtc.include_dirs_of(["-I/a", "--include-path=/b", "-I=/c", "-lineinfo"]) == (
        "/a",
        "/b",
        "/c",
    )
