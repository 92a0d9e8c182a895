"""What a PTX module declares: its kernel entries and their parameters.

The launcher packs parameters by a declared layout; these read the compiled
kernel's own view (each ``.entry`` and the byte size of each ``.param``), so a
bridge can check that the two agree before anything is launched.
"""

from __future__ import annotations

import re

__all__ = ["PtxError", "ptx_entries", "ptx_entry", "ptx_params"]

_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(")
# ``.param [.align N] .<type> [.ptr [.space] [.align N]] name[[N]]``
_PARAM = re.compile(
    r"\.param\s+(?:\.align\s+\d+\s+)?\.([busf])(\d+)\s+"
    r"(?:\.ptr\s+(?:\.(?:global|shared|const|local)\s+)?(?:\.align\s+\d+\s+)?)?"
    r"([\w$]+)\s*(\[\d+\])?\s*$"
)
_SIZES = {"8": 1, "16": 2, "32": 4, "64": 8}


class PtxError(ValueError):
    """PTX without the entry, or with entries, that the caller expected."""


def ptx_entries(ptx: str) -> tuple[str, ...]:
    """The names of every ``.entry`` (kernel) in ``ptx``, in order.

    Example:
        >>> ptx_entries(".visible .entry k(\\n.param .u64 k_param_0\\n)\\n{}")
        ('k',)
    """
    return tuple(_ENTRY.findall(ptx))


def ptx_entry(ptx: str) -> str:
    """The name of the only ``.entry`` in ``ptx``."""
    names = ptx_entries(ptx)
    if len(names) != 1:
        raise PtxError(f"expected one .entry in the PTX, found {len(names)}: {list(names)}")
    return names[0]


def ptx_params(ptx: str, entry: str | None = None) -> tuple[int, ...]:
    """The byte size of each ``.param`` of ``entry`` (default: the only entry),
    in order; an aggregate declared as ``.b8 name[N]`` counts ``N`` bytes.

    Example:
        >>> ptx_params(".entry k(\\n.param .u64 a,\\n.param .align 8 .b8 s[24],\\n.param .f32 b\\n)")
        (8, 24, 4)
    """
    name = ptx_entry(ptx) if entry is None else entry
    for match in _ENTRY.finditer(ptx):
        if match.group(1) == name:
            break
    else:
        raise PtxError(f"the PTX has no .entry {name!r}; it has {list(ptx_entries(ptx))}")
    end = ptx.index(")", match.end())
    sizes = []
    for text in ptx[match.end() : end].split(","):
        if not text.strip():
            continue
        found = _PARAM.match(text.strip())
        if found is None:
            raise PtxError(f"cannot read parameter {text.strip()!r} of .entry {name!r}")
        _kind, bits, _pname, count = found.groups()
        n = int(count[1:-1]) if count else 1
        sizes.append(_SIZES[bits] * n)
    return tuple(sizes)
