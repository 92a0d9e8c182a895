"""What a Warp kernel call is: the kernel's parameters, its specializations,
the launch dimensions and the dtype/rank signature one handler serves.

Everything here runs at wrap or trace time, before anything is bound.
"""

from __future__ import annotations

import dataclasses
import threading
import typing
from collections.abc import Sequence
from typing import Any

import ffi_core
import ffi_core.bridge
import numpy as np
from ffi_core.bridge import KernelInfo as KernelInfoBase
from ffi_core.bridge import check_kernel_type, kernel_digest

from ._warp import HALF_DTYPES, SUPPORTED_DTYPES, dtype_name_of, wp, wp_types

__all__ = [
    "DIMS_ATTR",
    "DTYPES",
    "KIND",
    "CallSig",
    "KernelInfo",
    "Param",
    "attribute_dtype",
    "attribute_order",
    "attribute_value",
    "backward_counts",
]

#: The kernels, as dtype errors name them.
KIND = "Warp"

#: The dtype table: what the checks accept and how their messages name the kernels.
DTYPES = ffi_core.bridge.KernelDTypes(SUPPORTED_DTYPES, "Warp kernels")

#: ``wp.tid()`` grids and Warp arrays have at most this many dimensions.
MAX_DIMS = wp_types.LAUNCH_MAX_DIMS


@dataclasses.dataclass(frozen=True)
class Param:
    """One parameter of a Warp kernel.

    ``dtype`` is a name from ``SUPPORTED_DTYPES`` (for an array of vectors or
    matrices, their scalar type's), or None for a generic (``Any``) array;
    ``ndim`` is the Warp array's rank, None for scalars. ``shape`` is the
    shape of one element (``(3,)`` for ``wp.vec3``, ``(2, 2)`` for
    ``wp.mat22``, ``()`` for scalars): the JAX array has these trailing axes
    after the Warp array's ``ndim`` ones.
    """

    name: str
    dtype: str | None
    ndim: int | None
    shape: tuple[int, ...] = ()
    #: Warp's vector/matrix/quaternion/transform type of one element (None
    #: for arrays of scalars, generic arrays and scalars).
    composite: Any = None

    @property
    def is_array(self) -> bool:
        return self.ndim is not None

    @property
    def rank(self) -> int:
        """The rank of the JAX array passed for this (array) parameter."""
        return typing.cast(int, self.ndim) + len(self.shape)

    def element(self) -> Any:
        """Warp's type of one element (None for a generic array)."""
        if self.composite is not None:
            return self.composite
        return None if self.dtype is None else getattr(wp, self.dtype)

    def declared(self) -> str:
        """The array as the kernel declares it, for messages."""
        if not self.shape:
            return f"wp.array({self.dtype or 'any dtype'}, {self.ndim}-d)"
        axes = ", ".join(map(str, self.shape))
        return (
            f"wp.array({wp_types.type_repr(self.composite)}, {self.ndim}-d), so {self.dtype} "
            f"with {self.rank} axes, the last ({axes})"
        )


def _composite(t: Any) -> bool:
    return bool(
        wp_types.type_is_vector(t)
        or wp_types.type_is_matrix(t)
        or wp_types.type_is_quaternion(t)
        or wp_types.type_is_transformation(t)
    )


def _param(kernel_name: str, arg: Any) -> Param:
    """The parameter as Warp represents it (``kernel.adj.args``): an array
    type in any of Warp's spellings (``wp.array(dtype=float)``,
    ``wp.array[float]``, ``wp.array2d[float]``, an overload's types) is read
    through ``wp_types.is_array``, never by its class name."""
    where = f"parameter '{arg.label}' of warp kernel '{kernel_name}'"
    t = arg.type
    if wp_types.is_array(t):
        family = wp_types.concrete_array_type(t)
        if family is not wp_types.array:
            raise TypeError(
                f"{where} is a wp.{family.__name__} ({_type_text(t)}); warp-ffi passes "
                "wp.array parameters (a JAX array is a plain contiguous array)"
            )
        if not isinstance(t.ndim, int):
            raise TypeError(
                f"{where} is {_type_text(t)}, an array of any rank; warp-ffi passes arrays of "
                "a declared rank: annotate it as wp.array[dtype] (1-d) or wp.array2d[dtype] "
                "to wp.array4d[dtype], or pass an overload (kernel.add_overload) of that rank"
            )
        if t.dtype is typing.Any:
            return Param(arg.label, None, t.ndim)
        name = dtype_name_of(t.dtype)
        if name is not None:
            return Param(arg.label, name, t.ndim)
        scalar = dtype_name_of(getattr(t.dtype, "_wp_scalar_type_", None))
        if _composite(t.dtype) and scalar is not None:
            shape = tuple(int(n) for n in t.dtype._shape_)
            return Param(arg.label, scalar, t.ndim, shape, t.dtype)
        raise TypeError(
            f"{where} is an array of {wp_types.type_repr(t.dtype)}; warp-ffi passes arrays "
            f"of scalars ({', '.join(SUPPORTED_DTYPES)}) and of Warp's vectors, matrices, "
            "quaternions and transforms of them"
        )
    name = dtype_name_of(t)
    if name is None:
        raise TypeError(
            f"{where} has type {_type_text(t)}; warp-ffi passes wp.array parameters "
            f"and scalars ({', '.join(SUPPORTED_DTYPES)})"
        )
    return Param(arg.label, name, None)


def _type_text(t: Any) -> str:
    # Array annotations print as their source (``wp.array2d[wp.float32]``);
    # Warp's type_repr names everything else.
    return repr(t) if isinstance(t, wp_types._ArrayAnnotationBase) else wp_types.type_repr(t)


def _digest(kernel: Any) -> str:
    # An overload (``add_overload``/``wp.overload``) shares its generic
    # kernel's function and options but compiles differently: its argument
    # types are part of its digest.
    if getattr(kernel, "generic_parent", None) is None:
        return kernel_digest(kernel.func, kernel.options)
    return kernel_digest(kernel.func, {**kernel.options, "<warp overload>": kernel.sig})


class KernelInfo(KernelInfoBase):
    """A validated ``@wp.kernel``: its parameters and a digest of its code.

    The digest (the Python function's code, constants, closure values and
    globals, and the kernel's options; see ``ffi_core.bridge.kernel_digest``)
    names its FFI targets, so they are the same in every process.
    """

    def __init__(self, kernel: object) -> None:
        kernel = check_kernel_type(kernel, wp.Kernel, "a @wp.kernel function (a warp Kernel)")
        self.kernel = kernel
        name: str = kernel.key
        super().__init__(
            name=name,
            label=f"warp kernel '{name}'",
            qualname=f"{kernel.func.__module__}.{kernel.func.__qualname__}",
            digest=_digest(kernel),
        )
        self.params: tuple[Param, ...] = tuple(_param(name, a) for a in kernel.adj.args)
        self.arrays = tuple(p for p in self.params if p.is_array)
        self.scalars = tuple(p for p in self.params if not p.is_array)
        self.address_bound = ffi_core.bridge.address_bound_values(kernel.func)
        self._lock = threading.Lock()
        self._overloads: dict[tuple[str, ...], Any] = {}

    @property
    def generic(self) -> bool:
        return any(p.dtype is None for p in self.arrays)

    def scalars_as_keywords(self) -> str:
        """What an arity message adds about the scalar parameters (given as
        keywords, never positionally): "" where there is none."""
        if not self.scalars:
            return ""
        return (
            f" and scalar parameters ({', '.join(p.name for p in self.scalars)}) given as keywords"
        )

    def check_call(
        self, dtypes: Sequence[str], shapes: Sequence[tuple[int, ...]] | None, n_in: int
    ) -> None:
        """Check arrays (inputs then outputs) against the kernel's annotations
        (their ranks and an element's axes too, unless ``shapes`` is None)."""
        n = len(dtypes)
        if n != len(self.arrays):
            raise TypeError(
                f"warp kernel '{self.name}' has {len(self.arrays)} array parameters "
                f"({', '.join(p.name for p in self.arrays)}){self.scalars_as_keywords()}, "
                "but is called with "
                f"{n_in} inputs and {n - n_in} outputs ({n} arrays); the convention is "
                "kernel(in_1, ..., in_n, out_1, ..., out_m) with scalars anywhere"
            )
        for k, (p, dtype) in enumerate(zip(self.arrays, dtypes, strict=True)):
            what = f"input {k}" if k < n_in else f"output {k - n_in}"
            shape = None if shapes is None else tuple(shapes[k])
            rank = p.rank if shape is None else len(shape)
            inner = p.shape if shape is None else shape[len(shape) - len(p.shape) :]
            if (p.dtype is not None and p.dtype != dtype) or p.rank != rank or p.shape != inner:
                got = f"{dtype}[{rank}d]" if not p.shape else f"{dtype}{list(shape or ())}"
                raise TypeError(
                    f"{what} of warp kernel '{self.name}' (parameter '{p.name}') is "
                    f"{got}, but the kernel declares {p.declared()}"
                )

    def specialized(self, dtypes: Sequence[str]) -> Any:
        """The kernel for these array dtypes: itself, or for a generic kernel
        its overload, made once."""
        if not self.generic:
            return self.kernel
        key = tuple(dtypes)
        with self._lock:
            overload = self._overloads.get(key)
            if overload is None:
                types: list[Any] = []
                arrays = iter(dtypes)
                for p in self.params:
                    if p.is_array:
                        dtype = next(arrays)
                        element = p.element() if p.dtype is not None else getattr(wp, dtype)
                        types.append(wp.array(dtype=element, ndim=p.ndim))
                    else:
                        types.append(
                            getattr(wp, typing.cast(str, p.dtype))
                        )  # a scalar Param always has a dtype
                overload = self.kernel.add_overload(types)
                self._overloads[key] = overload
        return overload

    def scalar_values(self, given: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
        """The scalar keyword arguments of a call, checked and typed
        (``(name, numpy scalar)`` in parameter order)."""
        names = {p.name for p in self.scalars}
        unknown = sorted(set(given) - names)
        if unknown:
            accepted = ", ".join(sorted(names)) or "none"
            raise TypeError(
                f"warp kernel '{self.name}' has no scalar parameter {unknown[0]!r} "
                f"(its scalar parameters: {accepted})"
            )
        values = []
        for p in self.scalars:
            if p.name not in given:
                raise TypeError(
                    f"warp kernel '{self.name}' needs its scalar parameter '{p.name}' "
                    f"({p.dtype}) as a keyword argument, e.g. op(..., {p.name}=...)"
                )
            values.append((p.name, _scalar(self.name, p, given[p.name])))
        return tuple(values)


def _scalar(kernel_name: str, p: Param, value: Any) -> Any:
    where = f"scalar parameter '{p.name}' of warp kernel '{kernel_name}'"
    # A scalar Param always has a dtype.
    return ffi_core.bridge.scalar_value(value, typing.cast(str, p.dtype), where)


def attribute_dtype(dtype: str) -> str:
    """The dtype of the FFI attribute carrying a scalar of ``dtype``: XLA has
    no float16 or bfloat16 attributes, so those travel as their 16 bits (uint16)."""
    return "uint16" if dtype in HALF_DTYPES else dtype


def attribute_value(value: Any) -> Any:
    """A checked scalar (from ``scalar_values``) as its attribute's value."""
    return value.view(np.uint16) if value.dtype.name in HALF_DTYPES else value


def backward_counts(n_inputs: int, n_outputs: int) -> tuple[int, int]:
    """``(n_in, n_out)``, the kernel's inputs and outputs, of a backward call
    with these buffer counts. Its inputs are the primal inputs then the
    outputs' cotangents (``n_in + n_out``); its outputs the inputs' gradients,
    scratch outputs the forward is replayed into, then the cotangents again,
    aliased so Warp may change them (``n_in + 2 * n_out``)."""
    n_out = n_outputs - n_inputs
    return n_inputs - n_out, n_out


@dataclasses.dataclass(frozen=True)
class CallSig(ffi_core.bridge.CallSig):
    """ffi-core's signature, and what else a Warp handler is generated for:
    ``backward`` (the adjoint kernel), ``hint`` (one more ignored input, the
    cost hint of large calls) and the scalar parameters' dtypes."""

    backward: bool = False
    hint: bool = False
    #: The grid is the first output's shape (the default ``launch_dims``),
    #: read by the handler from that buffer instead of an attribute: a call
    #: then reads no attribute at all when the kernel has no scalars.
    grid_from_output: bool = False
    #: The array indices of the in-out parameters (``_inout``): the first
    #: outputs, which the kernel sees in their place.
    in_out: tuple[int, ...] = ()
    #: Threads per block of the CPU launch (above 1: Warp's cooperative CPU
    #: blocks, ``wp.config.enable_cpu_blocks``).
    block_dim: int = 1
    #: The kernel's bounds-checked copy, probed in a child first (``_checked``).
    boundscheck: bool = dataclasses.field(default=False, repr=False)

    def name_parts(self) -> tuple[str, ...]:
        return (repr(self), "boundscheck") if self.boundscheck else (repr(self),)

    def primal_dtypes(self) -> tuple[str, ...]:
        """The dtypes of the kernel's array parameters (which pick its
        specialization): forward, the inputs and outputs; backward, the primal
        inputs and the scratch outputs the forward is replayed into."""
        if not self.backward:
            return tuple(a.dtype for a in (*self.inputs, *self.outputs[len(self.in_out) :]))
        n_in, n_out = backward_counts(len(self.inputs), len(self.outputs))
        return tuple(a.dtype for a in (*self.inputs[:n_in], *self.outputs[n_in : n_in + n_out]))

    def to_step(self) -> dict[str, Any]:
        """The signature as the JSON fields of an export recipe step."""
        return {
            **super().to_step(),
            "backward": self.backward,
            "hint": self.hint,
            "grid_from_output": self.grid_from_output,
            "in_out": list(self.in_out),
            "block_dim": self.block_dim,
            **({"boundscheck": True} if self.boundscheck else {}),
        }


def _sorted_names(names: Sequence[str]) -> list[str]:
    # XLA sorts a call's attributes by their bytes.
    return sorted(names, key=lambda n: n.encode())


#: The attribute holding the launch grid: not an identifier, so never a parameter's name.
DIMS_ATTR = "launch.dims"


def attribute_order(info: KernelInfo, *, dims: bool) -> list[str]:
    """The names of a call's attributes in the order the handler finds them:
    the scalar parameters, and the launch grid unless the handler reads it from
    the first output (``dims=False``)."""
    return _sorted_names([p.name for p in info.scalars] + ([DIMS_ATTR] if dims else []))
