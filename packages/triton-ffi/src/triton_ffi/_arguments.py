"""The arguments of :func:`~triton_ffi.compile_triton` checked against the
kernel they are for: the signature's dtypes, the ``tl.constexpr`` values and
the compute capability, each refused with a message naming what it accepts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["DTYPES", "check_constexprs", "constexpr_mismatch"]

#: Each supported numpy dtype name -> (Triton type string, byte size of a scalar
#: of it in the launch). A ``bool`` scalar is an ``i1`` in Triton and a 1-byte
#: ``.u8`` parameter in the PTX.
DTYPES: dict[str, tuple[str, int]] = {
    "float16": ("fp16", 2),
    "bfloat16": ("bf16", 2),
    "float32": ("fp32", 4),
    "float64": ("fp64", 8),
    "int8": ("i8", 1),
    "int16": ("i16", 2),
    "int32": ("i32", 4),
    "int64": ("i64", 8),
    "uint8": ("u8", 1),
    "uint16": ("u16", 2),
    "uint32": ("u32", 4),
    "uint64": ("u64", 8),
    "bool": ("i1", 1),
}

_ACCEPTED = ", ".join(sorted(DTYPES))


def constexpr_mismatch(
    params: Sequence[Any], constexprs: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    """``(unknown, missing)``: the names in ``constexprs`` that are not
    tl.constexpr parameters of a kernel with ``params``, and its tl.constexpr
    parameters without a default that ``constexprs`` lacks."""
    constexpr_names = [p.name for p in params if p.is_constexpr]
    unknown = [name for name in constexprs if name not in constexpr_names]
    missing = [
        p.name for p in params if p.is_constexpr and p.name not in constexprs and not p.has_default
    ]
    return unknown, missing


def check_constexprs(
    where: str, kname: str, params: Sequence[Any], constexprs: Mapping[str, Any]
) -> None:
    """The ValueError of ``compile_triton`` and ``run_interpreted`` (``where``)
    for ``constexprs`` that do not fit kernel ``kname``'s ``params``."""
    unknown, missing = constexpr_mismatch(params, constexprs)
    if unknown:
        names = [p.name for p in params if p.is_constexpr]
        raise ValueError(
            f"{where}: constexprs names {unknown[0]!r}, which is not a tl.constexpr "
            f"parameter of kernel {kname!r}; its tl.constexpr parameters are {names}"
        )
    if missing:
        raise ValueError(
            f"{where}: constexprs lacks {missing}, tl.constexpr parameters of kernel "
            f"{kname!r} without a default"
        )


def _import_triton() -> Any:
    """The ``triton`` module, or an ImportError saying what to install."""
    try:
        import triton
    except ImportError as exc:  # pragma: no cover - triton is a dependency on Linux
        raise ImportError(f"triton-ffi needs the 'triton' package (Linux only): {exc}") from exc
    return triton


def _check_cc(cc: object) -> tuple[int, int]:
    if (
        not isinstance(cc, tuple)
        or len(cc) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in cc)
    ):
        raise TypeError(
            f"compile_triton: cc must be a (major, minor) tuple of ints such as (9, 0), got {cc!r}"
        )
    return (cc[0], cc[1])


def _check_arguments(
    kernel: Any, signature: Mapping[str, str], constexprs: Mapping[str, object]
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, object], ...]]:
    """Validate the names and dtypes against the kernel's parameters.

    Returns the signature in the kernel's parameter order and the constexprs
    (defaults filled in) in the same order, both as hashable tuples.
    """
    kname = kernel.__name__
    if not isinstance(signature, Mapping):
        raise TypeError(
            f"compile_triton: signature must be a dict of parameter name -> dtype name, "
            f"got {type(signature).__name__}"
        )
    if not isinstance(constexprs, Mapping):
        raise TypeError(
            f"compile_triton: constexprs must be a dict of parameter name -> value, "
            f"got {type(constexprs).__name__}"
        )
    params = list(kernel.params)
    names = [p.name for p in params]
    constexpr_names = [p.name for p in params if p.is_constexpr]
    for name in signature:
        if name not in names:
            raise ValueError(
                f"compile_triton: signature names {name!r}, which kernel {kname!r} does not have; "
                f"its parameters are {names}"
            )
        if name in constexpr_names:
            raise ValueError(
                f"compile_triton: {name!r} is a tl.constexpr parameter of kernel {kname!r}; "
                "give its value in constexprs, not a dtype in signature"
            )
    check_constexprs("compile_triton", kname, params, constexprs)
    missing = [n for n in names if n not in constexpr_names and n not in signature]
    if missing:
        raise ValueError(
            f"compile_triton: signature lacks {missing}, parameters of kernel {kname!r} "
            "that are not tl.constexpr; give each a dtype name such as '*float32' or 'int32'"
        )
    sig = []
    consts = []
    for p in params:
        if p.is_constexpr:
            consts.append((p.name, constexprs[p.name] if p.name in constexprs else p.default))
            continue
        spec = signature[p.name]
        if not isinstance(spec, str) or spec.removeprefix("*") not in DTYPES:
            raise TypeError(
                f"compile_triton: signature[{p.name!r}] is {spec!r}, not a supported type; "
                f"expected a dtype name, with a leading '*' for a pointer, from: {_ACCEPTED}"
            )
        sig.append((p.name, spec))
    return tuple(sig), tuple(consts)
