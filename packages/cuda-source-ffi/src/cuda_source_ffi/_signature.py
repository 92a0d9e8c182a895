"""A kernel's C++ parameter list, read from its source, for the types PTX loses.

NVRTC's PTX gives each parameter's size only: a ``const float*`` and a
``const int*`` are both 8 bytes, an ``int`` and a ``float`` both 4. The element
and scalar types are read here from the ``__global__`` function's parameter
list in the source, where it is written plainly: a kernel found once (or
declared several times alike), each parameter a known C++ arithmetic type, one
``*`` at most. Anything else (a template parameter, a macro, a struct) reads as
unknown, and the declaration alone then decides.
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["SourceParam", "source_params"]

#: C++ spellings (qualifiers removed, words joined by one space) -> numpy dtype name.
C_TYPES = {
    "bool": "bool",
    "char": "int8",
    "signed char": "int8",
    "int8_t": "int8",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
    "short": "int16",
    "short int": "int16",
    "signed short": "int16",
    "int16_t": "int16",
    "unsigned short": "uint16",
    "unsigned short int": "uint16",
    "uint16_t": "uint16",
    "int": "int32",
    "signed": "int32",
    "signed int": "int32",
    "int32_t": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "uint32_t": "uint32",
    "long": "int64",
    "long int": "int64",
    "long long": "int64",
    "long long int": "int64",
    "signed long long": "int64",
    "int64_t": "int64",
    "ptrdiff_t": "int64",
    "unsigned long": "uint64",
    "unsigned long long": "uint64",
    "unsigned long long int": "uint64",
    "uint64_t": "uint64",
    "size_t": "uint64",
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "__half": "float16",
    "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16",
}

#: Words of a parameter's declaration that do not change its type.
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct"}

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_STRINGS = re.compile(r'"(?:\\.|[^"\\])*"')


@dataclasses.dataclass(frozen=True)
class SourceParam:
    """One parameter as written: its name, whether it is a pointer, and its
    (pointee) dtype, None where the type is not one of :data:`C_TYPES`."""

    name: str
    pointer: bool
    dtype: str | None
    text: str


def source_params(source: str, kernel: str) -> tuple[SourceParam, ...] | None:
    """The parameters of ``__global__`` function ``kernel`` (a name
    expression: ``"axpy"``, ``"ns::f"``, ``"scale<float>"``) in ``source``, or
    None where they cannot be read plainly."""
    base = re.split(r"[<(]", kernel, maxsplit=1)[0].split("::")[-1].strip()
    if not base.isidentifier():
        return None
    text = _STRINGS.sub('""', _COMMENTS.sub(" ", source))
    head = re.compile(
        r"__global__\s+(?:[\w:]+\s+|__launch_bounds__\s*\([^()]*\)\s*)*?"
        + re.escape(base)
        + r"\s*\("
    )
    found = set()
    for match in head.finditer(text):
        inner = _balanced(text, match.end())
        if inner is None:
            return None
        found.add(inner)
    if len(found) != 1:
        return None  # absent, or overloads: the declaration decides
    (inner,) = found
    if not inner.strip() or inner.strip() == "void":
        return ()
    params = []
    for part in _split(inner):
        param = _param(part)
        if param is None:
            return None
        params.append(param)
    return tuple(params)


def _balanced(text: str, start: int) -> str | None:
    """The text from ``start`` to the parenthesis closing the one before it."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start:i]
    return None


def _split(inner: str) -> list[str]:
    """``inner`` split at the commas outside brackets and template arguments."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for c in inner:
        if c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    parts.append("".join(current))
    return parts


def _param(part: str) -> SourceParam | None:
    text = " ".join(part.split("=")[0].split())
    if "&" in text or "[" in text or "(" in text or "<" in text:
        return None  # references, arrays, function pointers, templates: not read
    stars = text.count("*")
    if stars > 1:
        return None
    words = [w for w in re.findall(r"[\w:]+", text) if w not in _QUALIFIERS]
    words = [w.removeprefix("std::") for w in words]
    if len(words) < 2 or not words[-1].isidentifier():
        return None
    name, type_name = words[-1], " ".join(words[:-1])
    return SourceParam(name, stars == 1, C_TYPES.get(type_name), text)
