"""A Griffe extension for the docs site (mkdocs.yml): docstrings here head their
doctests `Example:` or `Example (on a GPU):`, which Griffe's Google parser reads
as an admonition of Markdown (where `>>>` is a quote); it renders an `Examples:`
section as code. The source keeps its wording; the site gets code blocks."""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^(?P<indent>[ \t]*)Example(?: \((?P<note>[^)]*)\))?:[ \t]*$", re.MULTILINE)


def as_examples(docstring: str) -> str:
    """`docstring` with each `Example[ (note)]:` heading turned into `Examples:`."""

    def heading(match: re.Match[str]) -> str:
        indent, note = match.group("indent"), match.group("note")
        if not note:
            return f"{indent}Examples:"
        return f"{indent}Examples:\n{indent}    {note[0].upper()}{note[1:]}:\n"

    return _EXAMPLE.sub(heading, docstring)


class ExampleSections(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = as_examples(obj.docstring.value)
