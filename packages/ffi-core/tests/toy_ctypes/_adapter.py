"""C functions ``void f(const float *in_1, ..., float *out_1, ..., int64_t n)``
over float32 vectors of one length ``n``, as JAX operations."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
from ffi_core.bridge import KernelCall, KernelDTypes, KernelInfo, kernel_op
from ffi_core.bridge.cpu import CpuPlan, HandlerBody, HandlerSpec, build_cpu_handler, cpu_call

from ._compile import CFunction

DTYPES = KernelDTypes(("float32",), "C functions")


class CInfo(KernelInfo):
    """A validated ``CFunction``."""

    def __init__(self, function: Any) -> None:
        if not isinstance(function, CFunction):
            raise TypeError(f"`function` must be a CFunction (compile_c), got {type(function)!r}")
        self.function = function
        super().__init__(
            name=function.name,
            label=f"C function '{function.name}'",
            qualname=f"toy_ctypes.{function.name}",
            digest=function.digest,
        )


@dataclasses.dataclass(frozen=True)
class CPlanner:
    """How ``cpu_call`` runs a C function: a pointer per buffer, then ``n``."""

    info: CInfo

    @property
    def label(self) -> str:
        return self.info.label

    def plan(self, inputs, outputs, batched, hint) -> CpuPlan:
        spec = HandlerSpec(self.label, inputs, outputs, batched, int(hint))
        n_in = len(inputs)
        # n: the length of one vector (the last axis; a batch is the first).
        setup = (f"n = buffer_dim(b_{n_in}, {outputs[0].rank - 1})",)

        def pointers(row: bool) -> str:
            # Pointers travel as integers: so does n (both in integer registers).
            # In row b of a batch, a batched buffer's pointer is b vectors on.
            steps = [row and (k >= n_in or batched[k]) for k in range(len(spec.arrays))]
            items = [
                f"buffer_data(b_{k})" + (" + b * n * 4" if step else "")
                for k, step in enumerate(steps)
            ]
            return ", ".join([*items, "n"])

        address = self.info.function.address
        body = HandlerBody(
            call=(f"call_void_fn({address}, ({pointers(False)},))", "return 0"),
            row=(f"call_void_fn({address}, ({pointers(batched is not None)},))", "error = 0"),
            imports=("from ffi_core.abi.native import call_void_fn",),
            setup=setup,
        )
        return CpuPlan(
            f"toy_ctypes.{self.info.name}",
            (self.info.digest, repr(spec)),
            content=f"{self.info.qualname}:{self.info.digest}:{spec!r}",
            build=lambda: build_cpu_handler(spec, body),
        )


def _launch(
    call: KernelCall, out_avals: tuple[Any, ...], args: Sequence[Any], scalars: Mapping[str, Any]
) -> Sequence[Any]:
    del scalars
    return cpu_call(
        CPlanner(call.info), args, out_avals, aliases=call.aliases, vmap_method=call.vmap_method
    )


def _vector_shape(outs: Any) -> tuple[int, ...]:
    shapes = {tuple(o.shape) for o in jax.tree.leaves(outs)}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"`outs` must be vectors of one length, got shapes {sorted(shapes)}")
    return shapes.pop()


def c_kernel(
    function: CFunction, outs: Any, *, vmap_method: str | None = None
) -> Callable[..., Any]:
    """``function`` as a JAX operation on vectors of the length of ``outs``."""
    shape = _vector_shape(outs)

    def check_call(args: Sequence[Any], scalars: Mapping[str, Any]) -> None:
        del scalars
        if any(a.shape != shape for a in args):
            raise ValueError(f"the inputs of C function '{function.name}' must be of shape {shape}")

    return kernel_op(
        CInfo(function),
        outs,
        dtypes=DTYPES,
        launch=_launch,
        vmap_method=vmap_method,
        vmap_methods=(None, "sequential"),
        check_call=check_call,
    )
