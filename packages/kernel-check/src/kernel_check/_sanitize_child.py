"""The process the sanitize check runs under ``compute-sanitizer``: import the
module that defines the op, take the op by name, call it on the saved inputs
with the saved keywords. ``python -m kernel_check._sanitize_child FOLDER
MODULE ATTR``."""

from __future__ import annotations

import importlib
import json
import pathlib
import sys
from collections.abc import Sequence
from typing import Any

from ._child import load

__all__ = ["decode_kwargs", "main"]


def decode_kwargs(data: Any) -> dict[str, Any]:
    """The keywords ``_sanitize.encode_kwargs`` wrote."""
    import jax

    def one(value: Any) -> Any:
        if isinstance(value, list):
            return [one(v) for v in value]
        if isinstance(value, dict) and sorted(value) == ["tuple"]:
            return tuple(one(v) for v in value["tuple"])
        if isinstance(value, dict) and sorted(value) == ["dtype", "shape"]:
            return jax.ShapeDtypeStruct(tuple(value["shape"]), value["dtype"])
        return value

    return {name: one(value) for name, value in data.items()}


def main(argv: Sequence[str]) -> None:
    folder, module, attr = pathlib.Path(argv[0]), argv[1], argv[2]
    op = getattr(importlib.import_module(module), attr)
    import jax

    kwargs = decode_kwargs(json.loads((folder / "kwargs.json").read_text()))
    jax.block_until_ready(op(*load(folder, "args"), **kwargs))


if __name__ == "__main__":
    main(sys.argv[1:])
