"""Compile a ``@triton.jit`` kernel ahead of time for one CUDA target, without a GPU.

The result names every parameter of the compiled CUDA entry in order, with its
byte size, so a native launcher can pack them from XLA buffers and scalars.

How it compiles:
    Triton's compiler runs fully on the host: the Python front end, MLIR and
    LLVM produce PTX, and the ``ptxas`` bundled in the ``triton`` wheel turns
    it into a cubin (``ptxas`` from CUDA 12.9 below sm_90, the newer
    ``ptxas-blackwell`` from CUDA 13 for sm_90 and up; sm_90 and up compile
    for the architecture-specific ``sm_90a``-style target). No driver is needed.
    The pipeline is driven stage by stage in memory (``ttir`` -> ``ttgir`` ->
    ``llir`` -> ``ptx`` -> ``cubin``), the way ``triton.compile`` drives it,
    but without Triton's on-disk cache: that cache's location is a
    process-wide knob. A result is cached per process, and on disk in
    triton-ffi's own cache (``$TRITON_FFI_CACHE_DIR``, see ``_cache``), so a
    second process loads it without compiling.
    Nothing global is set: every option goes to the backend explicitly
    (``enable_fp_fusion`` too, which otherwise makes Triton 3.9 warn, and the
    target ``arch``, which ``TRITON_OVERRIDE_ARCH`` would otherwise replace).

Specialization:
    Scalars are never specialized on their value (Triton's own launcher turns
    an integer equal to 1 into a constant and marks multiples of 16), so one
    compile serves every value. Pointers are declared 16-byte aligned
    (``tt.divisibility = 16``), as Triton's launcher does for any tensor whose
    address allows it: this lets unmasked accesses use 128-bit vector loads
    (a mask against an unspecialized ``n`` still limits them). XLA's GPU
    buffers meet it (allocations and the slices XLA hands to custom calls are
    at least 16-byte aligned); a launcher must still refuse a pointer that is
    not a multiple of :attr:`CompiledTriton.pointer_align`.

Launch contract:
    The entry takes the pointer and scalar parameters of the signature in the
    kernel's order (``tl.constexpr`` ones are compiled in and absent), then
    the parameters Triton appends (``kind == "scratch"``): a global scratch
    pointer and a profile scratch pointer. Pass 0 (a null pointer) where the
    matching ``*_scratch_size`` is 0; otherwise pass device memory of
    ``size * grid_x * grid_y * grid_z * num_ctas`` bytes aligned to the
    matching ``*_scratch_align``. The block is ``(32 * num_warps, 1, 1)``;
    ``shared_mem`` bytes of dynamic shared memory go in the launch, and above
    48 KiB the function needs ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``
    first. ``num_ctas`` is always 1 here, so no cluster launch is needed.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Mapping
from typing import Any

from ._arguments import DTYPES as DTYPES
from ._arguments import _check_arguments, _check_cc
from ._arguments import _import_triton as _import_triton
from ._arguments import check_constexprs as check_constexprs
from ._arguments import constexpr_mismatch as constexpr_mismatch
from ._cache import cached_compile
from ._compiled import _POINTER_ALIGN, _POINTER_SIZE, SCRATCH_PARAMS, _check_against_ptx
from ._compiled import CompiledTriton as CompiledTriton
from ._compiled import TritonCompileError as TritonCompileError
from ._compiled import TritonParam as TritonParam

__all__ = [
    "DTYPES",
    "CompiledTriton",
    "TritonCompileError",
    "TritonParam",
    "compile_triton",
]

# ``DTYPES``, ``check_constexprs``, ``constexpr_mismatch``, ``_import_triton``
# and ``_check_against_ptx`` are imported by name for the modules that take
# them from here.

_LOCK = threading.Lock()


@dataclasses.dataclass(frozen=True, eq=False)
class _Identity:
    """Keys the compile cache on the kernel object itself, not on Triton's
    source hash (which can fail before the compile error could be reported)."""

    kernel: Any

    def __hash__(self) -> int:
        return id(self.kernel)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.kernel is self.kernel


def compile_triton(
    kernel: Any,
    signature: Mapping[str, str],
    constexprs: Mapping[str, object],
    *,
    cc: tuple[int, int],
    num_warps: int = 4,
    num_stages: int = 3,
    enable_fp_fusion: bool = True,
    aligned: bool = True,
) -> CompiledTriton:
    """Compile ``kernel`` for compute capability ``cc`` (cached per process,
    and on disk across processes: ``$TRITON_FFI_CACHE_DIR``).

    ``aligned=False`` declares no pointer alignment (``pointer_align`` 1): for
    pointers that may be offset inside a buffer, such as one batch element's
    rows.

    ``signature`` maps every parameter that is not ``tl.constexpr`` to a numpy
    dtype name, with a leading ``*`` for a pointer (``{"x": "*float32", "n":
    "int32"}``); ``constexprs`` gives each ``tl.constexpr`` parameter's value
    (one with a default may be left out). ``enable_fp_fusion`` lets the
    compiler contract ``a * b + c`` into an FMA (Triton 3.9's default).
    """
    triton = _import_triton()
    if not isinstance(kernel, triton.JITFunction):
        raise TypeError(
            "compile_triton: kernel must be a @triton.jit function (triton.JITFunction), "
            f"got {type(kernel).__name__}"
        )
    cc = _check_cc(cc)
    if not isinstance(num_warps, int) or num_warps < 1 or num_warps & (num_warps - 1):
        raise ValueError(f"compile_triton: num_warps must be a power of two, got {num_warps!r}")
    if not isinstance(num_stages, int) or num_stages < 1:
        raise ValueError(
            f"compile_triton: num_stages must be a positive integer, got {num_stages!r}"
        )
    sig, consts = _check_arguments(kernel, signature, constexprs)
    try:
        hash(consts)
    except TypeError:
        raise TypeError(
            f"compile_triton: constexprs values must be hashable, got {dict(consts)!r}"
        ) from None
    with _LOCK:  # one compile per key, even when threads ask at once
        return _compile_cached(
            _Identity(kernel),
            sig,
            consts,
            cc,
            num_warps,
            num_stages,
            bool(enable_fp_fusion),
            bool(aligned),
        )


@functools.cache
def _compile_cached(
    kernel: _Identity,
    signature: tuple[tuple[str, str], ...],
    constexprs: tuple[tuple[str, object], ...],
    cc: tuple[int, int],
    num_warps: int,
    num_stages: int,
    enable_fp_fusion: bool,
    aligned: bool = True,
) -> CompiledTriton:
    fn = kernel.kernel
    names = [p.name for p in fn.params]
    sig = dict(signature)
    tsig = {}
    params = []
    for index, name in enumerate(names):
        if name not in sig:
            tsig[name] = "constexpr"
            continue
        spec = sig[name]
        dtype = spec.removeprefix("*")
        ttype, size = DTYPES[dtype]
        if spec.startswith("*"):
            tsig[name] = "*" + ttype
            params.append(TritonParam(name, "pointer", dtype, _POINTER_SIZE, index))
        else:
            tsig[name] = ttype
            params.append(TritonParam(name, "scalar", dtype, size, index))
    params.extend(TritonParam(n, "scratch", "", _POINTER_SIZE, -1) for n in SCRATCH_PARAMS)
    attrs = {
        (names.index(p.name),): [["tt.divisibility", _POINTER_ALIGN]]
        for p in params
        if p.kind == "pointer" and aligned
    }
    arch = cc[0] * 10 + cc[1]
    options = {
        "num_warps": num_warps,
        "num_stages": num_stages,
        "num_ctas": 1,
        "enable_fp_fusion": enable_fp_fusion,
        "arch": f"sm{arch}",
    }
    pointer_align = _POINTER_ALIGN if aligned else 1

    def build() -> CompiledTriton:
        try:
            stages, metadata = _run_pipeline(fn, tsig, dict(constexprs), attrs, arch, options)
        except Exception as exc:
            raise TritonCompileError(
                f"Triton could not compile kernel {fn.__name__!r} for sm_{arch}: {exc}"
            ) from exc
        entry = str(metadata["name"])
        ptx = str(stages["ptx"])
        _check_against_ptx(fn.__name__, ptx, entry, tuple(params))
        return CompiledTriton(
            name=fn.__name__,
            entry=entry,
            cc=cc,
            ptx=ptx,
            cubin=bytes(stages["cubin"]),
            num_warps=int(metadata["num_warps"]),
            num_stages=int(metadata["num_stages"]),
            shared_mem=int(metadata["shared"] or 0),
            params=tuple(params),
            num_ctas=int(metadata["num_ctas"]),
            cluster_dims=(int(metadata["num_ctas"]), 1, 1),
            global_scratch_size=int(metadata["global_scratch_size"]),
            global_scratch_align=int(metadata["global_scratch_align"]),
            profile_scratch_size=int(metadata["profile_scratch_size"]),
            profile_scratch_align=int(metadata["profile_scratch_align"]),
            pointer_align=pointer_align,
        )

    parts = (signature, constexprs, sorted(options.items()), aligned)
    return cached_compile(fn, parts, cc, tuple(params), pointer_align, build)


def _run_pipeline(
    fn: Any,
    signature: dict[str, str],
    constexprs: dict[str, object],
    attrs: dict[tuple[int], list[list[object]]],
    arch: int,
    options: dict[str, object],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run Triton's stages in memory; return each stage's output and the
    metadata the stages fill in (``name``, ``shared``, scratch sizes...)."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend

    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    opts = backend.parse_options(options)
    src = ASTSource(fn, signature, constexprs, attrs)
    stages: dict[str, Any] = {}
    backend.add_stages(stages, opts, src.language)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module: Any = src.make_ir(
        target, opts, backend.get_codegen_implementation(opts), backend.get_module_map(), context
    )
    # Values of Triton's own types (ints, bytes, its target): checked by their users.
    metadata: dict[str, Any] = {"target": target, **opts.__dict__}
    outputs: dict[str, Any] = {}
    for ext, stage in stages.items():
        module = stage(module, metadata)
        outputs[ext] = module
    return outputs, metadata
