"""Compile C source with gcc and find one function in it."""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import pathlib
import shutil
import subprocess
import tempfile

from ffi_core.bridge import KernelCompileError


class CCompileError(KernelCompileError):
    """C source that gcc does not compile."""


@dataclasses.dataclass(frozen=True, eq=False)
class CFunction:
    """A compiled C function: its name, a digest of what it was compiled from
    (names its FFI targets: the same in every process) and its address."""

    name: str
    digest: str
    address: int
    library: ctypes.CDLL  # keeps the code loaded while the function lives


def compile_c(source: str, name: str) -> CFunction:
    """Compile ``source`` into a shared library and return its function ``name``."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError("compile_c needs gcc on the PATH (apt-get install gcc)")
    folder = pathlib.Path(tempfile.mkdtemp(prefix="toy_ctypes_"))
    (folder / "kernel.c").write_text(source)
    library = folder / "kernel.so"
    command = [gcc, "-O2", "-shared", "-fPIC", "-o", str(library), str(folder / "kernel.c")]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CCompileError(f"gcc does not compile the source of {name!r}:\n{done.stderr}")
    loaded = ctypes.CDLL(str(library))
    address = ctypes.cast(getattr(loaded, name), ctypes.c_void_p).value
    digest = hashlib.sha256(f"{name}\0{source}".encode()).hexdigest()[:24]
    return CFunction(name, digest, address, loaded)
