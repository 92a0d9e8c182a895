"""What a source's ``#include`` lines reach on disk: the part of an NVRTC
compile's input that its arguments do not show."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Sequence

__all__ = ["Headers", "headers", "include_dirs_of"]

#: ``#include "x.h"``, ``#include <x.h>`` or ``#include MACRO``: what follows ``include``.
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\b[ \t]*(.*?)[ \t]*(?://.*)?$", re.MULTILINE)

#: ``--include-path=dir`` or ``-Idir``: an NVRTC option naming an include directory.
_INCLUDE_OPTION = re.compile(r"^(?:--include-path=|-I=?)(.+)$")


def include_dirs_of(options: Sequence[str]) -> tuple[str, ...]:
    """The include directories that NVRTC ``options`` name (``-Idir``,
    ``--include-path=dir``), in order."""
    found = (_INCLUDE_OPTION.match(o) for o in options)
    return tuple(m.group(1).strip() for m in found if m and m.group(1).strip())


@dataclasses.dataclass(frozen=True)
class Headers:
    """What a source's ``#include`` lines reach on disk.

    ``digest`` covers each header file found (its include spelling, path and
    content), recursively through the headers it includes, searched where
    NVRTC may look: the including file's directory, the working directory and
    the include directories. ``from_disk`` is True when any header was read
    from disk, or an ``#include`` names its file through a macro (which this
    scan cannot follow): such a compile is cached in memory only.
    """

    digest: str
    from_disk: bool


def headers(source: str, include_dirs: Sequence[str] = ()) -> Headers:
    """The :class:`Headers` of ``source`` compiled with ``include_dirs``."""
    h = hashlib.sha256()
    from_disk = False
    seen: set[str] = set()
    pending: list[tuple[str, str | None]] = [(source, None)]
    while pending:
        text, here = pending.pop()
        for spec in _INCLUDE.findall(text):
            if len(spec) < 2 or (spec[0], spec[-1]) not in (('"', '"'), ("<", ">")):
                h.update(f"unread include {spec}\n".encode())
                from_disk = True
                continue
            roots = [*([here] if here else []), os.getcwd(), *include_dirs]
            for root in dict.fromkeys(roots):
                path = os.path.join(root, spec[1:-1])
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:  # absent, a directory, unreadable: not what NVRTC includes
                    continue
                from_disk = True
                h.update(f"{spec} {path} ".encode() + hashlib.sha256(data).digest())
                if path not in seen:
                    seen.add(path)
                    pending.append((data.decode(errors="replace"), os.path.dirname(path)))
    return Headers(h.hexdigest(), from_disk)
