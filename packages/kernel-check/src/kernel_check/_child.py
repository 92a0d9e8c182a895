"""The fresh process of the export check: import the modules that define the
op's kernels, deserialize the blob (verified with the check's key), call it
on the saved inputs, save the outputs. ``python -m kernel_check._child FOLDER MODULE...``."""

from __future__ import annotations

import importlib
import json
import pathlib
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["load", "main", "save"]


def save(folder: pathlib.Path, stem: str, arrays: Sequence[Any]) -> None:
    """Write ``arrays`` as ``stem.json`` (dtypes, shapes) and ``stem.bin`` (bytes):
    no pickle, and bfloat16 survives."""
    arrays = [np.asarray(a) for a in arrays]
    meta = [[a.dtype.name, list(a.shape)] for a in arrays]
    (folder / f"{stem}.json").write_text(json.dumps(meta))
    (folder / f"{stem}.bin").write_bytes(
        b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)
    )


def load(folder: pathlib.Path, stem: str) -> list[np.ndarray]:
    """The arrays :func:`save` wrote."""
    import jax.numpy as jnp  # knows bfloat16 and the other ml_dtypes by name

    meta = json.loads((folder / f"{stem}.json").read_text())
    data = (folder / f"{stem}.bin").read_bytes()
    arrays, at = [], 0
    for name, shape in meta:
        dtype = jnp.dtype(name)
        n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        arrays.append(np.frombuffer(data[at : at + n], dtype).reshape(shape))
        at += n
    return arrays


def main(argv: Sequence[str]) -> None:
    folder, modules = pathlib.Path(argv[0]), argv[1:]
    for name in modules:
        importlib.import_module(name)
    import jax
    from ffi_core import deserialize

    key = (folder / "op.key").read_bytes()
    exported = deserialize((folder / "op.blob").read_bytes(), key=key)
    outs = jax.tree.leaves(exported.call(*load(folder, "args")))
    save(folder, "outs", outs)


if __name__ == "__main__":
    main(sys.argv[1:])
