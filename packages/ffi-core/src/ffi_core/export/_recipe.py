"""The values of export recipe steps, and the rules a step read from a blob
must pass before a rebuilder sees it.

A recipe step is a dict of JSON data (:func:`to_json`); :func:`from_json`
turns it back into values, refusing anything :func:`to_json` never writes.
A rebuilder declares what each field of its steps may hold with
:class:`StepField`; :func:`check_step` holds a decoded step to them and raises
:class:`ExportError` naming the first field that breaks them.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..abi._dtypes import SUPPORTED_DTYPES

__all__ = [
    "CALL_SIG_FIELDS",
    "MAX_BUFFERS",
    "MAX_DEPTH",
    "MAX_DISTRIBUTION",
    "MAX_RANK",
    "ExportError",
    "MissingKernelError",
    "StepField",
    "Unexportable",
    "check_distribution",
    "check_step",
    "from_json",
    "to_json",
]

#: The most dimensions an array of a recipe has: NumPy's own limit.
MAX_RANK = 64
#: The most inputs (or outputs) a recipe's signature lists.
MAX_BUFFERS = 1024
#: The deepest nesting of values (tuples, lists, dicts) a recipe step holds.
MAX_DEPTH = 16
#: The longest str field of a recipe (kernel names, contexts).
MAX_TEXT = 4096
#: The largest dimension of a shape in a recipe (XLA's dimensions are int64).
MAX_DIM = 2**62

# A dtype as ``np.dtype(...).str`` writes it: byte order, kind, item size.
_DTYPE_STR = re.compile(r"[<>|=][biufc]\d{1,2}")
_HEX = re.compile(r"[0-9a-f]{8,128}")


class ExportError(ValueError):
    """A function whose kernels cannot be made again in another process, or a
    blob that :func:`ffi_core.deserialize` refuses (corrupt, truncated, of
    another format, or holding a recipe that breaks its rules)."""


class MissingKernelError(LookupError):
    """A target of an exported function whose kernel this process does not have."""


@dataclasses.dataclass(frozen=True)
class Unexportable:
    """A recipe step that cannot be written down, and why (said on export)."""

    reason: str


# -- values in recipes --------------------------------------------------------------


def to_json(value: Any) -> Any:
    """``value`` as JSON data that :func:`from_json` turns back into an equal
    value: None, bool, int, float, str, tuple, list, dict with str keys, NumPy
    dtypes and scalars. Anything else raises TypeError.

    Example:
        >>> to_json((1, "a"))
        {'tuple': [1, 'a']}
        >>> from_json(to_json((1, "a")))
        (1, 'a')
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple):
        return {"tuple": [to_json(v) for v in value]}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": [[k, to_json(v)] for k, v in value.items()]}
    if isinstance(value, np.dtype):
        return {"dtype": value.str}
    if isinstance(value, np.generic):
        return {"scalar": value.dtype.str, "value": value.item()}
    raise TypeError(f"{type(value).__qualname__} value {value!r}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _dtype(text: Any, where: str) -> np.dtype:
    if not (isinstance(text, str) and _DTYPE_STR.fullmatch(text)):
        raise ExportError(
            f"`{where}` must be a NumPy dtype string such as '<f4' (byte order, kind of "
            f"b/i/u/f/c, item size), got {_short(text)}"
        )
    try:
        return np.dtype(text)
    except TypeError:
        raise ExportError(f"`{where}` is not a NumPy dtype: {_short(text)}") from None


def from_json(data: Any, where: str = "value", depth: int = 0) -> Any:
    """The value :func:`to_json` wrote; anything else raises
    :class:`ExportError` naming ``where`` (the field being read)."""
    if depth > MAX_DEPTH:
        raise ExportError(f"`{where}` is nested deeper than {MAX_DEPTH} levels")
    if data is None or isinstance(data, bool | int | float | str):
        return data
    if isinstance(data, list):
        return [from_json(v, f"{where}[{k}]", depth + 1) for k, v in enumerate(data)]
    if not isinstance(data, dict):
        raise ExportError(f"`{where}` is not recipe data: {type(data).__qualname__}")
    keys = sorted(data)
    if keys == ["tuple"] and isinstance(data["tuple"], list):
        items = data["tuple"]
        return tuple(from_json(v, f"{where}[{k}]", depth + 1) for k, v in enumerate(items))
    if keys == ["dict"] and isinstance(data["dict"], list):
        out = {}
        for k, pair in enumerate(data["dict"]):
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                raise ExportError(
                    f"`{where}[{k}]` must be a [str key, value] pair, got {_short(pair)}"
                )
            out[pair[0]] = from_json(pair[1], f"{where}[{pair[0]!r}]", depth + 1)
        return out
    if keys == ["dtype"]:
        return _dtype(data["dtype"], f"{where}.dtype")
    if keys == ["scalar", "value"]:
        dtype = _dtype(data["scalar"], f"{where}.scalar")
        value = data["value"]
        if not isinstance(value, bool | int | float):
            raise ExportError(f"`{where}.value` must be a number, got {_short(value)}")
        try:
            return dtype.type(value)
        except (OverflowError, TypeError, ValueError) as exc:
            raise ExportError(f"`{where}.value` {_short(value)} is not a {dtype}: {exc}") from None
    raise ExportError(
        f"`{where}` must be recipe data (a dict with the single key 'tuple', 'dict' or "
        f"'dtype', or the keys 'scalar' and 'value'), got the keys {keys}"
    )


# -- the fields of a step -----------------------------------------------------------

#: The longest distribution name a step may carry.
MAX_DISTRIBUTION = 100
# A distribution's name as packaging's core metadata defines it (PEP 508):
# ASCII letters and digits, with '.', '_' or '-' inside.
_DISTRIBUTION = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?", re.ASCII)


def check_distribution(name: object) -> bool:
    """Whether ``name`` is a distribution name (``"numba-cpu-ffi"``) of at
    most :data:`MAX_DISTRIBUTION` characters.

    Example:
        >>> check_distribution("numba-cpu-ffi"), check_distribution("x; rm -rf /")
        (True, False)
    """
    return (
        isinstance(name, str)
        and len(name) <= MAX_DISTRIBUTION
        and _DISTRIBUTION.fullmatch(name) is not None
    )


def _supported_dtype_name(value: Any) -> bool:
    return isinstance(value, str) and value in SUPPORTED_DTYPES


def _supported_dtype_str(value: Any) -> bool:
    if isinstance(value, str) and value in SUPPORTED_DTYPES:
        return True  # by name: the only spelling of bfloat16 that NumPy reads back
    if not (isinstance(value, str) and _DTYPE_STR.fullmatch(value)):
        return False
    try:
        return str(np.dtype(value)) in SUPPORTED_DTYPES
    except TypeError:
        return False


@dataclasses.dataclass(frozen=True)
class StepField:
    """What one field of a rebuilder's recipe steps may hold (see
    :func:`ffi_core.export.register_rebuilder`). Make one with the class methods;
    ``accepted`` says it in words for the error message.

    Example:
        >>> rank = StepField.integer(0, 3)
        >>> rank.accepts(2), rank.accepts(7), rank.accepts(True)
        (True, False, False)
        >>> StepField.array_sigs().accepts([["float32", 1], ["int64", 0]])
        True
    """

    accepted: str
    accepts: Callable[[Any], bool]
    #: The step field this one's list follows, one item per item of it
    #: (``"inputs"`` for ``batched``); None: no such rule.
    per_item_of: str | None = None
    #: A step may lack the field (one written before the field existed).
    may_be_absent: bool = False

    @classmethod
    def text(cls, max_len: int = MAX_TEXT) -> StepField:
        """A str of at most ``max_len`` characters."""
        return cls(
            f"a str of at most {max_len} characters",
            lambda v: isinstance(v, str) and len(v) <= max_len,
        )

    @classmethod
    def digest(cls) -> StepField:
        """A lower-case hex digest (8 to 128 digits)."""
        return cls("a hex digest", lambda v: isinstance(v, str) and bool(_HEX.fullmatch(v)))

    @classmethod
    def flag(cls) -> StepField:
        """True or False."""
        return cls("a bool", lambda v: isinstance(v, bool))

    @classmethod
    def integer(cls, low: int, high: int) -> StepField:
        """An int in ``low..high`` (not a bool)."""
        return cls(
            f"an int in {low}..{high}",
            lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high,
        )

    @classmethod
    def dtype(cls) -> StepField:
        """A dtype that has an FFI code, by name (``'bfloat16'``) or NumPy string (``'<f4'``)."""
        return cls(
            "a dtype name or NumPy dtype string ('<f4') of one of " + ", ".join(SUPPORTED_DTYPES),
            _supported_dtype_str,
        )

    @classmethod
    def added(cls, field: StepField) -> StepField:
        """What ``field`` accepts, or no such field in the step: a field
        added to a kind of step after steps without it were written."""
        return dataclasses.replace(field, may_be_absent=True)

    @classmethod
    def optional(cls, field: StepField) -> StepField:
        """None, or what ``field`` accepts."""
        return cls(
            f"None or {field.accepted}",
            lambda v: v is None or field.accepts(v),
            field.per_item_of,
        )

    @classmethod
    def sequence(cls, field: StepField, max_len: int = MAX_BUFFERS) -> StepField:
        """A list or tuple of at most ``max_len`` items, each what ``field`` accepts."""
        return cls(
            f"a list of at most {max_len} items, each {field.accepted}",
            lambda v: (
                isinstance(v, list | tuple)
                and len(v) <= max_len
                and all(field.accepts(x) for x in v)
            ),
        )

    @classmethod
    def per_item(cls, field: StepField, of: str) -> StepField:
        """A list or tuple with one item per item of the step's field ``of``
        (``check_step`` compares the lengths), each what ``field`` accepts.

        Example:
            >>> StepField.per_item(StepField.flag(), "inputs").accepted
            "a list of one item per item of 'inputs', each a bool"
        """
        inner = cls.sequence(field)
        return cls(
            f"a list of one item per item of {of!r}, each {field.accepted}", inner.accepts, of
        )

    @classmethod
    def items(cls, *fields: StepField) -> StepField:
        """A list or tuple of exactly ``len(fields)`` items, each what its field accepts."""
        return cls(
            f"a list of [{', '.join(f.accepted for f in fields)}]",
            lambda v: (
                isinstance(v, list | tuple)
                and len(v) == len(fields)
                and all(f.accepts(x) for f, x in zip(fields, v, strict=True))
            ),
        )

    @classmethod
    def value(cls) -> StepField:
        """Any recipe value (what :func:`from_json` read is already checked)."""
        return cls("a recipe value", lambda v: True)

    @classmethod
    def array_sigs(cls) -> StepField:
        """Arrays as ``ffi_core.bridge.CallSig`` lists them in a step: ``[dtype name,
        rank]`` pairs, the dtype one with an FFI code, the rank in
        ``0..MAX_RANK``."""
        return cls(
            f"a list of at most {MAX_BUFFERS} [dtype name, rank] pairs, the dtype one of "
            f"{', '.join(SUPPORTED_DTYPES)} and the rank an int in 0..{MAX_RANK}",
            cls.sequence(
                cls.items(cls("a dtype name", _supported_dtype_name), cls.integer(0, MAX_RANK))
            ).accepts,
        )


def check_step(step: Mapping[str, Any], fields: Mapping[str, StepField] | None, where: str) -> None:
    """Hold ``step`` (decoded) to ``fields``: every field present, no other
    (besides ``kind``, ``module`` and ``distribution``), each accepted. ``fields=None`` checks
    nothing more (the rebuilder checks its steps itself)."""
    if fields is None:
        return
    extra = sorted(set(step) - set(fields) - {"kind", "module", "distribution"})
    if extra:
        raise ExportError(f"`{where}` has fields its kind {step['kind']!r} does not: {extra}")
    for name, field in fields.items():
        if name not in step and field.may_be_absent:
            continue
        if name not in step:
            raise ExportError(f"`{where}.{name}` is missing (a {step['kind']!r} step has it)")
        if not field.accepts(step[name]):
            raise ExportError(
                f"`{where}.{name}` must be {field.accepted}, got {_short(step[name])}"
            )
    for name, field in fields.items():
        of, value = field.per_item_of, step.get(name)
        if of is None or not isinstance(value, list | tuple):
            continue
        other = step.get(of)
        if isinstance(other, list | tuple) and len(value) != len(other):
            raise ExportError(
                f"`{where}.{name}` must have one item per item of `{where}.{of}` "
                f"({len(other)}), got {len(value)}"
            )


#: The fields ``ffi_core.bridge.CallSig`` writes into a step (a bridge's ``to_step``):
#: ``inputs`` and ``outputs`` (:meth:`StepField.array_sigs`) and ``batched``
#: (None, or one bool per input: :meth:`StepField.per_item`).
CALL_SIG_FIELDS: Mapping[str, StepField] = types.MappingProxyType(
    {
        "inputs": StepField.array_sigs(),
        "outputs": StepField.array_sigs(),
        "batched": StepField.optional(StepField.per_item(StepField.flag(), "inputs")),
    }
)
