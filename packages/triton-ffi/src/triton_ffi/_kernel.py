"""``triton_kernel``: one ``@triton.jit`` kernel as a JAX GPU operation.

The kernel's parameters that are not ``tl.constexpr`` are, in order, one
pointer per input, one per output, then scalars. Constexprs are fixed when the
kernel is wrapped; scalars are static keywords of each call and travel as the
FFI call's attributes, so every value shares one compiled kernel and handler.
At lowering, the kernel is compiled for each local GPU's architecture (once
per signature, cached) and launched by ffi-core's native CUDA launcher.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from ffi_core import (
    ArraySig,
    KernelDTypes,
    ShapedCall,
    check_aliases,
    check_inputs,
    check_sharding_rule,
    check_vmap_method,
    output_avals,
    partitioned_call,
    resolve_sharding_rule,
    shaped_values,
)
from ffi_core.cuda import (
    LaunchPlan,
    LayoutBuilder,
    cuda_launch,
    launch_config,
    local_capabilities,
)

from ._compile import (
    DTYPES,
    CompiledTriton,
    TritonCompileError,
    compile_triton,
    constexpr_mismatch,
)

__all__ = ["SUPPORTED_DTYPES", "TritonKernel", "triton_kernel"]

#: The array dtypes a Triton kernel's pointers may point to.
SUPPORTED_DTYPES = tuple(DTYPES)
#: The dtype table: what the checks accept and how their messages name the kernels.
_DTYPES = KernelDTypes(SUPPORTED_DTYPES, "Triton kernels")
#: Where each compiled image came from, for the emulated GPU of the tests
#: (``triton_ffi.testing``): image digest -> (kernel, arrays as the kernel
#: sees them, the compiled entry's parameters).
_IMAGES: dict[str, tuple[TritonKernel, tuple[Any, ...], tuple[Any, ...]]] = {}
_IMAGES_LOCK = threading.Lock()


def _digest(kernel: Any, label: str) -> str:
    """A digest of everything the compiled kernel depends on.

    Triton's own ``JITFunction.cache_key`` (pure Python, no GPU needed) covers
    the source, its line, the ``@triton.jit`` functions it calls (their keys,
    recursively) and the ``tl.constexpr`` globals they read. Added here: every
    global or closure value Triton recorded (``tl`` dtypes and named tuples are
    allowed as globals but are not in its key), and the parameters' defaults
    (a constexpr left out takes its default, which its key does not hold).
    """
    try:
        key = kernel.cache_key
    except Exception as exc:  # Triton refuses what it cannot compile either
        raise TypeError(
            f"{label}: Triton cannot tell what the kernel depends on: {type(exc).__name__}: {exc}"
        ) from exc
    h = hashlib.sha256(key.encode())
    missing = object()
    for (gname, _), (value, scope) in kernel.used_global_vals.items():
        now = scope.get(gname, missing)
        if now is not value and _differs(now, value):
            shown = "removed" if now is missing else f"now {now!r}"
            raise RuntimeError(
                f"{label}: global {gname!r} was {value!r} when Triton first read the kernel "
                f"and is {shown}; Triton compiles a kernel against the values it read "
                "first: define the kernel again (run its @triton.jit definition) after "
                "changing the global"
            )
        h.update(f"global:{gname}={type(value).__qualname__}:{value!r}".encode())
    for param in kernel.params:
        if param.has_default:
            h.update(f"default:{param.name}={param.default!r}".encode())
    return h.hexdigest()[:24]


def _differs(now: Any, then: Any) -> bool:
    try:
        return bool(now != then)
    except Exception:  # values that do not compare to a bool: Triton's own check decides
        return False


def _scalar_dtype(name: str, value: Any, label: str) -> str:
    """The dtype a scalar parameter is passed as (Triton's rules for Python
    values: bool, int32 where it fits else int64, float32)."""
    if isinstance(value, np.generic):
        dtype = value.dtype.name
    elif isinstance(value, bool):
        dtype = "bool"
    elif isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise OverflowError(
                f"{label}: scalar parameter {name!r} is {value}, outside the int64 range that "
                "Triton passes a Python int as; pass a NumPy scalar of the kernel's type "
                "(e.g. numpy.uint64) instead"
            )
        dtype = "int32" if -(2**31) <= value < 2**31 else "int64"
    elif isinstance(value, float):
        dtype = "float32"
    else:
        raise TypeError(
            f"{label}: scalar parameter {name!r} must be an int, a float, a bool or a NumPy "
            f"scalar, got {type(value).__name__}"
        )
    if dtype not in DTYPES:
        raise TypeError(
            f"{label}: scalar parameter {name!r} has dtype {dtype}; accepted: {', '.join(DTYPES)}"
        )
    return dtype


def _grid(grid: Any, meta: Mapping[str, Any], label: str) -> tuple[int, ...]:
    value = grid(dict(meta)) if callable(grid) else grid
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, tuple | list) and 1 <= len(value) <= 3:
        if all(isinstance(g, int | np.integer) and not isinstance(g, bool) for g in value):
            return tuple(int(g) for g in value)
    what = "`grid` returned" if callable(grid) else "`grid` must be"
    raise TypeError(
        f"{label}: {what} an int or a tuple of 1 to 3 ints (or `grid` a callable of the "
        f"meta-parameters returning one), got {value!r}"
    )


@dataclasses.dataclass(frozen=True, eq=False)
class TritonKernel:
    """A ``@triton.jit`` kernel with its compile options, as the launcher plans it."""

    kernel: Any
    name: str
    digest: str
    constexprs: tuple[tuple[str, Any], ...]
    num_warps: int
    num_stages: int
    pointers: tuple[str, ...]  # names of the pointer parameters (inputs, outputs)
    scalars: tuple[tuple[str, str], ...]  # (name, dtype) of the scalar parameters
    grid: tuple[int, int, int]
    label: str

    def _key(self) -> tuple[Any, ...]:
        return (
            id(self.kernel),
            self.digest,
            self.constexprs,
            self.num_warps,
            self.num_stages,
            self.pointers,
            self.scalars,
            self.grid,
        )

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TritonKernel) and other._key() == self._key()

    def compile(self, dtypes: tuple[str, ...], cc: tuple[int, int], aligned: bool):
        signature = {n: "*" + d for n, d in zip(self.pointers, dtypes, strict=True)}
        signature.update(dict(self.scalars))
        return compile_triton(
            self.kernel,
            signature,
            dict(self.constexprs),
            cc=cc,
            num_warps=self.num_warps,
            num_stages=self.num_stages,
            aligned=aligned,
        )

    def plan(self, inputs, outputs, batched: bool) -> LaunchPlan:
        arrays: tuple[tuple[ArraySig, tuple[int, ...]], ...] = (*inputs, *outputs)
        dtypes = tuple(sig.dtype for sig, _ in arrays)
        builder = LayoutBuilder()
        compiled = self._compiled_everywhere(dtypes, not batched)
        for param in compiled.params:
            if param.kind == "pointer":
                builder.pointer(self.pointers.index(param.name))
            elif param.kind == "scalar":
                builder.scalar(param.name, param.dtype)
            else:  # the scratch pointers Triton appends: none is used
                builder.constant(0, "uint64")
        layout = builder.build()
        launch = launch_config(grid=self.grid, block=compiled.block, shared_mem=compiled.shared_mem)

        def image(cc: tuple[int, int]) -> tuple[bytes, str]:
            built = self.compile(dtypes, cc, not batched)
            if built.param_sizes != layout.param_sizes:
                raise TritonCompileError(
                    f"{self.label}: compiled for sm_{cc[0]}{cc[1]} with parameters of sizes "
                    f"{built.param_sizes}, not {layout.param_sizes}"
                )
            digest = hashlib.sha256(built.cubin).hexdigest()
            with _IMAGES_LOCK:
                _IMAGES[digest] = (self, tuple(arrays), built.params)
            return built.cubin, built.entry

        parts = (self.digest, repr(self.constexprs), f"w{self.num_warps}s{self.num_stages}")
        return LaunchPlan(f"triton.{self.name}", parts, layout, launch, image)

    def _compiled_everywhere(self, dtypes: tuple[str, ...], aligned: bool) -> CompiledTriton:
        """The kernel compiled for each local GPU; the launch they share."""
        first = None
        for cc in dict.fromkeys(local_capabilities(self.label)):
            compiled = self.compile(dtypes, cc, aligned)
            for size_name in ("global_scratch_size", "profile_scratch_size"):
                if getattr(compiled, size_name):
                    raise NotImplementedError(
                        f"{self.label} needs {getattr(compiled, size_name)} bytes of "
                        f"{size_name.removesuffix('_size').replace('_', ' ')} memory per "
                        f"program on sm_{cc[0]}{cc[1]} (for example for tensor "
                        "descriptors), which triton-ffi does not allocate"
                    )
            if first is None:
                first = compiled
            elif (compiled.shared_mem, compiled.block) != (first.shared_mem, first.block):
                raise NotImplementedError(
                    f"{self.label} compiles to different shared memory or block sizes on "
                    "this machine's GPUs; use GPUs of one architecture"
                )
        assert first is not None
        return first


def triton_kernel(
    kernel: Any,
    outs: Any,
    *,
    grid: int | tuple[int, ...] | Callable[[dict[str, Any]], Any],
    num_warps: int = 4,
    num_stages: int = 3,
    input_output_aliases: dict[int, int] | None = None,
    vmap_method: str | None = None,
    sharding_rule: Any = None,
    **constexprs: Any,
) -> Callable[..., Any]:
    """Wrap a ``@triton.jit`` kernel as a JAX GPU operation.

    Args:
        kernel: a ``@triton.jit`` function whose parameters that are not
            ``tl.constexpr`` are one pointer per input, one per output, then
            scalars.
        outs: a ``jax.ShapeDtypeStruct``, a sequence or a pytree of them; the
            call returns one array, a tuple or the same pytree.
        grid: programs per axis: an int, a tuple of up to 3 ints, or a callable
            of the meta-parameters (the constexprs and the call's scalars, a
            dict) returning one, as in Triton.
        num_warps, num_stages: Triton's compile options; the block is
            ``32 * num_warps`` threads.
        input_output_aliases: ``{input index: output index}``; the output
            reuses the input's buffer.
        vmap_method: None (one native call launching once per batch element),
            ``"sequential"`` / ``"sequential_unrolled"`` (an XLA loop), or
            ``"expand_dims"`` / ``"broadcast_all"`` (the kernel sees the batch
            as a leading axis).
        sharding_rule: how the kernel runs on shards under a sharded ``jit``
            (``"elementwise"``, Shardy's einsum-like notation such as
            ``"i j, j -> i"``, or an ``ffi_core.ShardingRule``): each device
            launches it on its shard, with scalars given as callables of the
            input shapes evaluated on the shard's (a size given as a plain
            number would stay the whole array's) and the grid computed from
            them. None (default): XLA gathers sharded inputs and every device
            computes the whole result.
        **constexprs: the value of each ``tl.constexpr`` parameter (those with
            a default may be left out).

    Returns:
        ``op(*inputs, **scalars)``: the kernel's scalar parameters are static
        keywords of each call; each may be a callable of the tuple of input
        shapes (``n=lambda shapes: shapes[0][0]``).

    Limitations:
        No derivative: ``jax.grad``, ``jax.jvp``, ``jax.vjp`` and
        ``jax.linear_transpose`` raise NotImplementedError naming the kernel;
        define one with ``XLACustomKernel.def_jvp_rule`` or wrap the
        operation in ``jax.custom_vjp``/``jax.custom_jvp``.

    Example (on a GPU):
        >>> add_op = triton_kernel(
        ...     add, jax.ShapeDtypeStruct((n,), jnp.float32),
        ...     grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),), BLOCK=1024,
        ... )  # doctest: +SKIP
        >>> jax.jit(lambda x, y: add_op(x, y, n=n))(x, y)  # doctest: +SKIP
    """
    from ._compile import _import_triton

    triton = _import_triton()
    if not isinstance(kernel, triton.JITFunction):
        raise TypeError(
            f"`kernel` must be a @triton.jit function (triton.JITFunction), "
            f"got {type(kernel).__name__}"
        )
    name = kernel.fn.__name__
    label = f"triton kernel '{name}'"
    params = list(kernel.params)
    constexpr_names = [p.name for p in params if p.is_constexpr]
    unknown, missing = constexpr_mismatch(params, constexprs)
    if unknown:
        raise TypeError(
            f"{label}: {unknown[0]!r} is not a tl.constexpr parameter of the kernel; its "
            f"tl.constexpr parameters are {constexpr_names}"
        )
    if missing:
        raise TypeError(
            f"{label}: missing the value of tl.constexpr parameter(s) {missing}; pass them "
            f"as keywords of triton_kernel, e.g. {missing[0]}=..."
        )
    if not callable(grid):
        _grid(grid, {}, label)  # a wrong type fails here, before any call
    check_vmap_method(vmap_method)
    avals, rebuild = output_avals(outs, accepted=_DTYPES)
    aliases = check_aliases(input_output_aliases, len(avals))
    runtime = [p.name for p in params if not p.is_constexpr]
    try:
        consts = tuple(sorted(constexprs.items()))
        hash(consts)
    except TypeError:
        raise TypeError(f"{label}: constexpr values must be hashable") from None
    digest = _digest(kernel, label)
    rule = check_sharding_rule(sharding_rule)

    def call(*args: Any, **scalars: Any) -> Any:
        n_ptr = len(args) + len(avals)
        if n_ptr > len(runtime):
            raise TypeError(
                f"{label} takes {len(runtime)} parameters that are not tl.constexpr "
                f"({', '.join(runtime)}), but got {len(args)} inputs and {len(avals)} outputs, "
                f"{n_ptr} pointers"
            )
        scalar_names = runtime[n_ptr:]
        unknown = sorted(set(scalars) - set(scalar_names))
        if unknown:
            raise TypeError(
                f"{label}: unexpected keyword(s) {unknown}; its scalar parameters (after "
                f"{n_ptr} pointers) are {scalar_names}"
            )
        absent = [s for s in scalar_names if s not in scalars]
        if absent:
            raise TypeError(
                f"{label}: missing scalar parameter(s) {absent}; pass them as keywords of the "
                f"call, e.g. op(..., {absent[0]}=...)"
            )
        check_inputs(args, avals, aliases, name=label, accepted=_DTYPES)
        shaped_now = shaped_values(scalars, args)
        for s in scalar_names:
            _scalar_dtype(s, shaped_now[s], label)
        resolved = resolve_sharding_rule(rule, args, avals, name=label, aliases=aliases)
        shaped = ShapedCall(launch_on, tuple(sorted(scalars.items())))
        return rebuild(tuple(partitioned_call(shaped, args, avals, resolved)))

    def launch_on(out_avals: Any, args: Any, scalars: dict[str, Any]) -> list[Any]:
        # The launch for these arrays: the whole ones, or a shard's.
        n_ptr = len(args) + len(avals)
        scalar_names = runtime[n_ptr:]
        typed = tuple((s, _scalar_dtype(s, scalars[s], label)) for s in scalar_names)
        launch_grid = _grid(grid, {**constexprs, **scalars}, label)
        planner = TritonKernel(
            kernel,
            name,
            digest,
            consts,
            num_warps,
            num_stages,
            tuple(runtime[:n_ptr]),
            typed,
            (*launch_grid, *(1,) * (3 - len(launch_grid))),  # type: ignore[arg-type]
            label,
        )
        attrs = tuple((s, d, scalars[s]) for s, d in typed)
        return cuda_launch(
            planner, args, out_avals, aliases=aliases, vmap_method=vmap_method, attrs=attrs
        )

    call.__name__ = name
    call.__qualname__ = name
    call.__doc__ = f"{label} as a JAX operation."
    return call
