"""What a kernel call is: its dtype/rank signature, the vmap methods and the
dtype tables bridges declare, and their checks.

One FFI target serves one (kernel, signature); sizes are read from the call
frame at run time, so a signature never includes them. The checks of a call's
outputs and inputs are in ``_outs`` and ``_checks``; all run in a bridge's
public function, before anything is traced or bound, and each names the
argument, the value it got and what is accepted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "BASIC_DTYPES",
    "COMPLEX_DTYPES",
    "VMAP_METHODS",
    "ArraySig",
    "CallSig",
    "KernelDTypes",
    "array_sig",
    "attribute_value",
    "check_dtype",
    "check_vmap_method",
]

#: The dtypes every native bridge passes, by name: bool, the integers and the
#: IEEE floats. Also the scalar types a kernel can take as FFI attributes.
BASIC_DTYPES: tuple[str, ...] = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
)

#: The complex dtypes, for bridges whose kernels take them.
COMPLEX_DTYPES: tuple[str, ...] = ("complex64", "complex128")


@dataclasses.dataclass(frozen=True)
class ArraySig:
    """The dtype (by name) and rank of one buffer.

    Example:
        >>> sig = ArraySig("float32", 2)
        >>> str(sig)
        'float32[2d]'
        >>> sig
        ArraySig(dtype='float32', rank=2)
    """

    dtype: str
    rank: int

    def __str__(self) -> str:
        return f"{self.dtype}[{self.rank}d]"


@dataclasses.dataclass(frozen=True, repr=False)
class CallSig:
    """The signature a handler is generated for: the inputs and outputs, and
    whatever else of the bridge's the handler depends on.

    ``batched`` is None for a plain call; for a call that runs a batch it says
    which inputs carry a leading batch axis (every output does). Ranks include
    that axis. ``extras`` are the bridge's own fields, ``(name, value)`` pairs
    (a dict is taken too), read as attributes (``sig.context``): one class
    serves every bridge. Its ``repr`` names FFI targets, so it depends only on
    the fields: the extras follow ``batched``, in their order.

    Example:
        >>> f32 = ArraySig("float32", 1)
        >>> sig = CallSig((f32, ArraySig("int32", 0)), (f32,))
        >>> sig.describe()
        'inputs (float32[1d], int32[0d]) and outputs (float32[1d])'
        >>> CallSig((f32,), (f32,), (True,))
        CallSig(inputs=(ArraySig(dtype='float32', rank=1),), outputs=(ArraySig(dtype='float32', rank=1),), batched=(True,))
        >>> sig = CallSig((f32,), (f32,), extras={"context": "add"})
        >>> sig.context, repr(sig).endswith("batched=None, context='add')")
        ('add', True)
    """

    inputs: tuple[ArraySig, ...]
    outputs: tuple[ArraySig, ...]
    batched: tuple[bool, ...] | None = None
    # Keyword-only and out of the generated repr: a subclass that declares its
    # own fields as dataclass fields takes them positionally and shows them in
    # its repr.
    extras: tuple[tuple[str, Any], ...] = dataclasses.field(default=(), kw_only=True, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.extras, Mapping):
            object.__setattr__(self, "extras", tuple(self.extras.items()))

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not fields: the bridge's extras.
        for key, value in self.__dict__.get("extras", ()):
            if key == name:
                return value
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self) -> str:
        fields = [
            f"inputs={self.inputs!r}",
            f"outputs={self.outputs!r}",
            f"batched={self.batched!r}",
            *(f"{key}={value!r}" for key, value in self.extras),
        ]
        return f"CallSig({', '.join(fields)})"

    def describe(self) -> str:
        """The inputs and outputs in words, for error messages."""
        ins = ", ".join(map(str, self.inputs)) or "none"
        outs = ", ".join(map(str, self.outputs))
        return f"inputs ({ins}) and outputs ({outs})"

    @property
    def kernel_arrays(self) -> tuple[ArraySig, ...]:
        """The inputs then the outputs as the kernel sees them: without the
        batch axis of a batch launched element by element.

        Example:
            >>> f32 = ArraySig("float32", 2)
            >>> CallSig((f32, ArraySig("int32", 0)), (f32,), (True, False)).kernel_arrays
            (ArraySig(dtype='float32', rank=1), ArraySig(dtype='int32', rank=0), ArraySig(dtype='float32', rank=1))
        """
        flags = self.batched or (False,) * len(self.inputs)
        ins = tuple(
            ArraySig(a.dtype, a.rank - 1) if b else a
            for a, b in zip(self.inputs, flags, strict=True)
        )
        outs = self.outputs
        if self.batched is not None:
            outs = tuple(ArraySig(a.dtype, a.rank - 1) for a in outs)
        return ins + outs

    def to_step(self) -> dict[str, Any]:
        """The signature as the JSON fields of an export recipe step (the
        extras as fields of their own; their values must be JSON values).

        Example:
            >>> CallSig((ArraySig("float32", 1),), (ArraySig("float32", 1),), extras={"hint": False}).to_step()
            {'inputs': [['float32', 1]], 'outputs': [['float32', 1]], 'batched': None, 'hint': False}
        """
        return {
            "inputs": [[a.dtype, a.rank] for a in self.inputs],
            "outputs": [[a.dtype, a.rank] for a in self.outputs],
            "batched": None if self.batched is None else list(self.batched),
            **dict(self.extras),
        }

    @classmethod
    def from_step(cls, step: Mapping[str, Any], extras: Sequence[str] = ()) -> CallSig:
        """The signature :meth:`to_step` wrote; ``extras`` names the bridge's
        extras, in order. A subclass's own dataclass fields are read from the
        step's fields of the same names; one the step lacks takes the field's
        default, and a list becomes a tuple where the default is one.

        Example:
            >>> sig = CallSig((ArraySig("int8", 0),), (ArraySig("int8", 0),), extras={"hint": True})
            >>> CallSig.from_step(sig.to_step(), ("hint",)) == sig
            True
        """

        def arrays(items: Any) -> tuple[ArraySig, ...]:
            return tuple(ArraySig(dtype, rank) for dtype, rank in items)

        own = {}
        for field in dataclasses.fields(cls)[len(dataclasses.fields(CallSig)) :]:
            value = (
                step[field.name]
                if field.default is dataclasses.MISSING
                else step.get(field.name, field.default)
            )
            own[field.name] = tuple(value) if isinstance(field.default, tuple) else value
        batched = step["batched"]
        return cls(
            arrays(step["inputs"]),
            arrays(step["outputs"]),
            None if batched is None else tuple(batched),
            extras=tuple((name, step[name]) for name in extras),
            **own,
        )


def attribute_value(dtype: str, value: Any) -> Any:
    """A scalar parameter's value as its FFI attribute: a ``dtype`` NumPy
    scalar (XLA has no float16 attributes: a float16 travels as its bits).

    Example:
        >>> attribute_value("float16", 1.0)
        np.uint16(15360)
    """
    scalar = np.asarray(value, dtype=dtype)
    if scalar.dtype == np.float16:
        scalar = scalar.view(np.uint16)
    return scalar[()]


def array_sig(aval: Any) -> ArraySig:
    """The ``ArraySig`` of anything with ``dtype`` and ``shape`` (an aval, an array).

    Example:
        >>> import numpy as np
        >>> array_sig(np.zeros((2, 3), np.float64))
        ArraySig(dtype='float64', rank=2)
    """
    return ArraySig(np.dtype(aval.dtype).name, len(aval.shape))


#: The ``vmap_method`` values every bridge accepts: None (one native call
#: over the batch), an XLA loop of calls (``"sequential"``,
#: ``"sequential_unrolled"``), or the kernel given the batch as a leading axis
#: of every array (``"expand_dims"``, ``"broadcast_all"``, as in
#: ``jax.ffi.ffi_call``). A bridge with more declares
#: ``(*ffi_core.bridge.VMAP_METHODS, "fold")``.
VMAP_METHODS: tuple[str | None, ...] = (
    None,
    "sequential",
    "sequential_unrolled",
    "expand_dims",
    "broadcast_all",
)


def check_vmap_method(vmap_method: Any, *, accepted: Sequence[str | None] = VMAP_METHODS) -> None:
    """A ValueError unless ``vmap_method`` is one of ``accepted``.

    Example:
        >>> check_vmap_method("sequential")
        >>> check_vmap_method("loop")
        Traceback (most recent call last):
        ValueError: `vmap_method` must be one of None, 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', got 'loop'
    """
    if vmap_method not in accepted:
        raise ValueError(
            f"`vmap_method` must be one of {', '.join(map(repr, accepted))}, got {vmap_method!r}"
        )


@dataclasses.dataclass(frozen=True)
class KernelDTypes:
    """The dtypes a bridge's kernels take, and those kernels as messages name them.

    Attributes:
        names: the accepted dtype names, in the order messages list them.
        kernels: the kernels as a plural noun, completing "which ... do not
            take" (``"numba CPU kernels"``, ``"Triton kernels"``).

    Example:
        >>> table = KernelDTypes(("float32", "int32"), "example kernels")
        >>> check_dtype("float16", "`x`", accepted=table)
        Traceback (most recent call last):
        TypeError: `x` has dtype float16, which example kernels do not take; supported: float32, int32
    """

    names: tuple[str, ...]
    kernels: str


def _dtype_table(accepted: Sequence[str] | KernelDTypes, kind: str | None) -> KernelDTypes:
    if isinstance(accepted, KernelDTypes):
        return accepted
    return KernelDTypes(tuple(accepted), f"{kind} kernels")


def check_dtype(
    dtype: Any, what: str, *, accepted: Sequence[str] | KernelDTypes, kind: str | None = None
) -> np.dtype:
    """``dtype`` as a numpy dtype, or a TypeError naming ``what``.

    Args:
        dtype: anything ``numpy.dtype`` accepts.
        what: the argument in words, for the message (``"input 0 of kernel 'add'"``).
        accepted: the bridge's ``KernelDTypes``; or the dtype names the
            kernels take, with ``kind``.
        kind: with a sequence of names, the kernels as an adjective
            (``"numba CPU"``: "which numba CPU kernels do not take").

    Raises:
        TypeError: ``dtype`` is not a dtype or not one of ``accepted``.

    Example:
        >>> check_dtype("float32", "`x`", accepted=("float32", "int32"), kind="example")
        dtype('float32')
        >>> check_dtype("float16", "`x`", accepted=("float32", "int32"), kind="example")
        Traceback (most recent call last):
        TypeError: `x` has dtype float16, which example kernels do not take; supported: float32, int32
    """
    table = _dtype_table(accepted, kind)
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        resolved = None
    if resolved is None or resolved.name not in table.names:
        raise TypeError(
            f"{what} has dtype {dtype}, which {table.kernels} do not take; "
            f"supported: {', '.join(table.names)}"
        )
    return resolved
